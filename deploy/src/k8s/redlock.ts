import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import { Service } from 'kubernetes-models/v1/Service'
import { type DeployConfig, EXPORTER_PORT, REDIS_PORT } from './config.js'
import {
  ACL_DIR,
  aclInitContainer,
  baseRedisConf,
  CONF_DIR,
  CONTAINER_SECURITY,
  dataClaim,
  exporterSidecar,
  onePodAtATime,
  REDIS_POD_SECURITY,
  redisProbes,
  redisVolumes,
  resources,
  spreadOut,
} from './redis-common.js'
import { redisTlsMounts, tlsSecretName } from './redis-tls.js'

/**
 * The 5 Redlock nodes: one StatefulSet of 5 independent, non-replicated masters (see
 * docs/operations.md#decisions). Clients reach each pod by its stable DNS name through the
 * headless Service: redis-redlock-0.redis-redlock.<ns>.svc.cluster.local … redis-redlock-4.
 */
export const REDLOCK_NAME = 'redis-redlock'
export const REDLOCK_REPLICAS = 5
/** Longer than kunci's default maxTtlMs (60 s): a restarted node has left quarantine before the next one goes. */
export const REDLOCK_MIN_READY_SECONDS = 75

export function redlockNodeAddresses(cfg: DeployConfig): string[] {
  return Array.from(
    { length: REDLOCK_REPLICAS },
    (_, i) => `${REDLOCK_NAME}-${i}.${REDLOCK_NAME}.${cfg.namespace}.svc.cluster.local:${REDIS_PORT}`,
  )
}

export function redlockObjects(cfg: DeployConfig) {
  const labels = { 'app.kubernetes.io/name': REDLOCK_NAME, 'app.kubernetes.io/part-of': 'kunci' }
  const metadata = { name: REDLOCK_NAME, namespace: cfg.namespace, labels }
  const conf = [
    ...baseRedisConf(cfg, false),
    `appendfsync ${cfg.redlock.appendfsync}`,
    // A lock key must never be evicted: a full node refuses new locks (OOM error, a failed vote)
    // instead of silently dropping one that is held.
    `maxmemory ${cfg.redlock.maxmemory}`,
    'maxmemory-policy noeviction',
    // Rewrites must not stall the fsync of lock writes.
    'no-appendfsync-on-rewrite no',
  ]
  const configMap = new ConfigMap({
    metadata: { ...metadata, name: `${REDLOCK_NAME}-conf` },
    data: { 'redis.conf': `${conf.join('\n')}\n` },
  })
  const headless = new Service({
    metadata,
    spec: {
      clusterIP: 'None',
      selector: labels,
      // Each node is addressed on its own: a node that is not ready is one lost vote, not a missing name.
      publishNotReadyAddresses: true,
      ports: [
        { name: 'redis', port: REDIS_PORT, targetPort: 'redis' },
        { name: 'metrics', port: EXPORTER_PORT, targetPort: 'metrics' },
      ],
    },
  })
  const statefulSet = new StatefulSet({
    metadata,
    spec: {
      serviceName: REDLOCK_NAME,
      replicas: REDLOCK_REPLICAS,
      // Independent nodes: no ordering between them is needed to start.
      podManagementPolicy: 'Parallel',
      minReadySeconds: REDLOCK_MIN_READY_SECONDS,
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          ...spreadOut(labels, cfg.redlock.zoneSpread),
          securityContext: REDIS_POD_SECURITY,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          initContainers: [aclInitContainer(cfg, false, cfg.exporterResources)],
          containers: [
            {
              name: 'redis',
              image: cfg.redisImage,
              command: ['redis-server', `${CONF_DIR}/redis.conf`],
              ports: [{ name: 'redis', containerPort: REDIS_PORT }],
              resources: resources(cfg.redlock.resources),
              securityContext: CONTAINER_SECURITY,
              ...redisProbes(cfg),
              volumeMounts: [
                { name: 'data', mountPath: '/data' },
                { name: 'conf', mountPath: CONF_DIR, readOnly: true },
                { name: 'acl', mountPath: ACL_DIR, readOnly: true },
                { name: 'secret', mountPath: '/etc/redis-secret', readOnly: true },
                { name: 'tmp', mountPath: '/tmp' },
                ...redisTlsMounts(cfg),
              ],
            },
            exporterSidecar(cfg),
          ],
          volumes: redisVolumes(cfg, `${REDLOCK_NAME}-conf`, tlsSecretName(REDLOCK_NAME)),
        },
      },
      volumeClaimTemplates: [dataClaim(cfg, labels, cfg.redlock.storage)],
    },
  })
  const pdb = onePodAtATime(metadata, labels)
  return [configMap, headless, statefulSet, pdb]
}
