import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import { Job } from 'kubernetes-models/batch/v1/Job'
import { CLUSTER_BUS_PORT, type DeployConfig, EXPORTER_PORT, REDIS_PORT } from './config.js'
import {
  baseRedisConf,
  CONF_DIR,
  CONTAINER_SECURITY,
  dataClaim,
  onePodAtATime,
  REDIS_POD_SECURITY,
  resources,
  SECRET_DIR,
} from './redis-common.js'
import { redisSetParts } from './redis-set.js'
import { CA_FILE, caMounts, tlsCliFlags, tlsSecretName, tlsVolumes } from './redis-tls.js'

/** The Redis Cluster of 3 masters + 3 replicas that holds stock, reservations, order streams and the cache. */
export const CLUSTER_NAME = 'redis-cluster'
export const CLUSTER_REPLICAS = 6
export const BOOTSTRAP_NAME = 'redis-cluster-bootstrap'

export function clusterHost(cfg: DeployConfig, i: number): string {
  return `${CLUSTER_NAME}-${i}.${CLUSTER_NAME}.${cfg.namespace}.svc.cluster.local`
}

export function clusterNodeAddresses(cfg: DeployConfig): string[] {
  return Array.from({ length: CLUSTER_REPLICAS }, (_, i) => `${clusterHost(cfg, i)}:${REDIS_PORT}`)
}

/**
 * Idempotent: creates the cluster when no slot is assigned yet; otherwise re-introduces every
 * pod by its current IP (CLUSTER MEET), which is what a full restart needs when all pod IPs
 * changed. Waits for cluster_state:ok either way, so the Job fails visibly if the cluster does not form.
 */
export function bootstrapScript(cfg: DeployConfig): string {
  const hosts = Array.from({ length: CLUSTER_REPLICAS }, (_, i) => clusterHost(cfg, i))
  return [
    'set -eu',
    `export REDISCLI_AUTH="$(cat ${SECRET_DIR}/admin-password)"`,
    // With TLS, redis-cli checks the chain only, so the pod IPs below need no IP SAN.
    `cli() { redis-cli --no-auth-warning ${tlsCliFlags(cfg, CA_FILE)}--user admin "$@"; }`,
    `HOSTS="${hosts.join(' ')}"`,
    'ADDRS=""',
    'for h in $HOSTS; do',
    '  until cli -h "$h" -p 6379 ping 2>/dev/null | grep -q PONG; do echo "waiting for $h"; sleep 2; done',
    '  ADDRS="$ADDRS $(getent hosts "$h" | cut -d" " -f1):6379"',
    'done',
    `FIRST=${hosts[0]}`,
    'if cli -h "$FIRST" cluster info | grep -q "^cluster_slots_assigned:0[^0-9]"; then',
    '  cli --cluster create $ADDRS --cluster-replicas 1 --cluster-yes',
    'else',
    '  for a in $ADDRS; do cli -h "$FIRST" cluster meet "$(echo "$a" | cut -d: -f1)" 6379; done',
    'fi',
    'until cli -h "$FIRST" cluster info | grep -q "^cluster_state:ok"; do echo "waiting for cluster_state:ok"; sleep 2; done',
    'cli -h "$FIRST" cluster info | head -n 7',
  ].join('\n')
}

export function clusterObjects(cfg: DeployConfig) {
  const conf = [
    ...baseRedisConf(cfg, true),
    'cluster-enabled yes',
    'cluster-config-file /data/nodes.conf',
    'cluster-node-timeout 5000',
    // Redis's default, set so nobody lowers it to 0: a replica whose link has been down longer
    // than 10 node time-outs, or a deposed master restarted and not yet synced, never promotes
    // itself with its old data over what the new master held alone (issue 37 item 6,
    // apps/flash-sale/test/integration/stale-master.test.ts). The price: if a master and a replica
    // that long cut off fail together, the slots wait for a human (docs/operations.md).
    'cluster-replica-validity-factor 10',
    // Clients get hostnames in MOVED/CLUSTER SHARDS: they survive a pod getting a new IP.
    'cluster-preferred-endpoint-type hostname',
    // The app waits for one replica (WAIT 1) after each reservation; everysec bounds what a
    // crash of master and replica together can lose to about one second.
    'appendfsync everysec',
    `maxmemory ${cfg.cluster.maxmemory}`,
    `maxmemory-policy ${cfg.cluster.evictionPolicy}`,
  ]
  const start = [
    // nodes.conf keeps this node's ID (its identity) on the PVC; only its own address is refreshed.
    `exec redis-server ${CONF_DIR}/redis.conf`,
    `--cluster-announce-hostname "$POD_NAME.${CLUSTER_NAME}.$POD_NAMESPACE.svc.cluster.local"`,
    '--cluster-announce-ip "$POD_IP"',
  ].join(' ')
  const { labels, metadata, configMap, headless, template } = redisSetParts(cfg, {
    name: CLUSTER_NAME,
    replicated: true,
    conf,
    servicePorts: [
      { name: 'redis', port: REDIS_PORT, targetPort: 'redis' },
      { name: 'bus', port: CLUSTER_BUS_PORT, targetPort: 'bus' },
      { name: 'metrics', port: EXPORTER_PORT, targetPort: 'metrics' },
    ],
    zoneSpread: cfg.cluster.zoneSpread,
    redis: {
      command: ['sh', '-c', start],
      env: [
        { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
      ],
      ports: [
        { name: 'redis', containerPort: REDIS_PORT },
        { name: 'bus', containerPort: CLUSTER_BUS_PORT },
      ],
      resources: cfg.cluster.resources,
    },
  })
  const statefulSet = new StatefulSet({
    metadata,
    spec: {
      serviceName: CLUSTER_NAME,
      replicas: CLUSTER_REPLICAS,
      podManagementPolicy: 'Parallel',
      minReadySeconds: 10,
      updateStrategy: { type: 'RollingUpdate' },
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
      selector: { matchLabels: labels },
      template,
      volumeClaimTemplates: [dataClaim(cfg, labels, cfg.cluster.storage)],
    },
  })
  const pdb = onePodAtATime(metadata, labels)
  const jobLabels = { 'app.kubernetes.io/name': BOOTSTRAP_NAME, 'app.kubernetes.io/part-of': 'kunci' }
  const bootstrap = new Job({
    metadata: { name: BOOTSTRAP_NAME, namespace: cfg.namespace, labels: jobLabels },
    spec: {
      backoffLimit: 20,
      ttlSecondsAfterFinished: 3600,
      template: {
        metadata: { labels: jobLabels },
        spec: {
          restartPolicy: 'OnFailure',
          securityContext: REDIS_POD_SECURITY,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          containers: [
            {
              name: 'bootstrap',
              image: cfg.redisImage,
              command: ['sh', '-c', bootstrapScript(cfg)],
              resources: resources(cfg.exporterResources),
              securityContext: CONTAINER_SECURITY,
              volumeMounts: [{ name: 'secret', mountPath: SECRET_DIR, readOnly: true }, ...caMounts(cfg)],
            },
          ],
          volumes: [
            { name: 'secret', secret: { secretName: 'redis-users', defaultMode: 0o400 } },
            ...tlsVolumes(cfg, tlsSecretName(CLUSTER_NAME), false),
          ],
        },
      },
    },
  })
  return [configMap, headless, statefulSet, pdb, bootstrap]
}
