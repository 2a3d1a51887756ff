import type { IObjectMeta } from '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta'
import { APP_ACL_RULES } from '@kunci/flash-sale'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim'
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec'
import { type DeployConfig, EXPORTER_PORT, REDIS_PORT, REDIS_USERS_SECRET, type Resources } from './config.js'
import { caMounts, exporterTlsEnv, TLS_DIR, tlsCliFlags, tlsRedisConf, tlsVolumes } from './redis-tls.js'

/**
 * What the Redis pods (lock nodes and cluster) share: ACL users generated at start from the
 * Secret, authenticated probes, the redis_exporter sidecar, hardened security contexts.
 */

/** Where the Secret's password files are mounted and the generated ACL file is written. */
export const SECRET_DIR = '/etc/redis-secret'
export const ACL_DIR = '/etc/redis-acl'
export const CONF_DIR = '/etc/redis-conf'

export interface AclUser {
  name: string
  /** Key in the `redis-users` Secret holding this user's password. */
  secretKey: string
  rules: readonly string[]
}

/**
 * The users of every Redis pod. `default` is off (DEFAULT_USER_ACL): a client that does not AUTH
 * gets nothing.
 * - flash-sale: the service and worker, with the rules of apps/flash-sale/src/redis/acl.ts.
 * - monitor: probes and redis_exporter: read-only introspection, no key access at all.
 * - admin: operators and the cluster bootstrap Job; still no FLUSHALL/FLUSHDB/DEBUG/KEYS/SHUTDOWN/MONITOR.
 * - replicator: what a replica needs to sync from its master (cluster only, harmless elsewhere).
 */
export const REDIS_USERS: readonly AclUser[] = Object.freeze([
  { name: 'flash-sale', secretKey: 'app-password', rules: APP_ACL_RULES },
  {
    name: 'monitor',
    secretKey: 'monitor-password',
    rules: [
      'on',
      'resetkeys',
      'resetchannels',
      '-@all',
      '+ping',
      '+info',
      '+config|get',
      '+cluster|info',
      '+cluster|nodes',
      '+slowlog|get',
      '+slowlog|len',
      '+latency|latest',
      '+client|list',
      '+memory|stats',
      '+select',
      '+dbsize',
    ],
  },
  {
    name: 'admin',
    secretKey: 'admin-password',
    rules: ['on', '~*', '&*', '+@all', '-flushall', '-flushdb', '-debug', '-keys', '-shutdown', '-monitor'],
  },
  {
    name: 'replicator',
    secretKey: 'replication-password',
    rules: ['on', '-@all', '+psync', '+replconf', '+ping'],
  },
])

export const SECRET_KEYS = Object.freeze(REDIS_USERS.map((u) => u.secretKey))

/**
 * The `default` user: off, no password (no client can log in as it), and every permission.
 * The permissions are not for clients: Redis replays the AOF's MULTI … EXEC blocks (every
 * script's effects: the sale's reservations, kunci's locks and fences) as the default user and
 * re-checks its ACL at EXEC, so with `-@all` a pod restarted from its AOF silently drops
 * everything a script wrote and keeps only the plain commands (redis/redis#14541, fixed by
 * #14545; valkey#3983). See docs/operations.md#the-default-user-and-the-aof.
 */
export const DEFAULT_USER_ACL = 'user default off resetpass ~* &* +@all'

/**
 * Shell run by an initContainer: writes the ACL file from the mounted Secret, storing SHA-256
 * hashes (`#<hex>`) so no password is ever written in clear to the pod's filesystem, except
 * masterauth, which Redis needs in clear to authenticate to its master (memory-backed emptyDir).
 */
export function aclInitScript(withReplication: boolean): string {
  const lines = [
    'set -eu',
    'umask 077',
    `hash() { printf '%s' "$(cat "${SECRET_DIR}/$1")" | sha256sum | cut -d' ' -f1; }`,
    `{`,
    `  echo '${DEFAULT_USER_ACL}'`,
    ...REDIS_USERS.map((u) => `  echo "user ${u.name} reset #$(hash ${u.secretKey}) ${u.rules.join(' ')}"`),
    `} > ${ACL_DIR}/users.acl`,
  ]
  if (withReplication) {
    lines.push(
      `printf 'masteruser replicator\\nmasterauth "%s"\\n' "$(cat ${SECRET_DIR}/replication-password)" > ${ACL_DIR}/replication.conf`,
    )
  } else {
    lines.push(`: > ${ACL_DIR}/replication.conf`)
  }
  return lines.join('\n')
}

/**
 * A redis-cli call as the monitor user, the password read from the Secret file, never from argv;
 * with TLS, verified against the pod's own CA file (redis-cli checks the chain, not the name).
 */
export function monitorCli(cfg: DeployConfig, args: string): string {
  return `REDISCLI_AUTH="$(cat ${SECRET_DIR}/monitor-password)" redis-cli --no-auth-warning ${tlsCliFlags(cfg, `${TLS_DIR}/ca.crt`)}--user monitor -h 127.0.0.1 -p ${REDIS_PORT} ${args}`
}

/**
 * Probes that authenticate. Startup: PING answers (LOADING while the AOF is replayed fails it,
 * with up to 10 minutes allowed). Readiness and liveness: PONG within the timeout.
 */
export function redisProbes(
  cfg: DeployConfig,
): Pick<IContainer, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> {
  const ping = { exec: { command: ['sh', '-c', `${monitorCli(cfg, 'ping')} | grep -q PONG`] } }
  return {
    startupProbe: { ...ping, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 120 },
    readinessProbe: { ...ping, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 2 },
    livenessProbe: { ...ping, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 6 },
  }
}

export function resources(r: Resources): NonNullable<IContainer['resources']> {
  return {
    requests: { cpu: r.cpuRequest, memory: r.memoryRequest },
    limits: { cpu: r.cpuLimit, memory: r.memoryLimit },
  }
}

/** Restricted Pod Security Standard for every container. */
export const CONTAINER_SECURITY: NonNullable<IContainer['securityContext']> = Object.freeze({
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
})

/** uid/gid 999 is `redis` in the official image; fsGroup makes the PVC writable for it. */
export const REDIS_POD_SECURITY: NonNullable<IPodSpec['securityContext']> = Object.freeze({
  runAsUser: 999,
  runAsGroup: 999,
  fsGroup: 999,
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' as const },
})

export function exporterSidecar(cfg: DeployConfig): IContainer {
  return {
    name: 'redis-exporter',
    image: cfg.exporterImage,
    ports: [{ name: 'metrics', containerPort: EXPORTER_PORT }],
    env: [
      ...exporterTlsEnv(cfg),
      { name: 'REDIS_USER', value: 'monitor' },
      {
        name: 'REDIS_PASSWORD',
        valueFrom: { secretKeyRef: { name: REDIS_USERS_SECRET, key: 'monitor-password' } },
      },
    ],
    resources: resources(cfg.exporterResources),
    ...(cfg.tls ? { volumeMounts: caMounts(cfg) } : {}),
    securityContext: { ...CONTAINER_SECURITY, runAsUser: 59000, runAsGroup: 59000 },
    startupProbe: { tcpSocket: { port: EXPORTER_PORT }, periodSeconds: 2, failureThreshold: 30 },
    readinessProbe: { httpGet: { path: '/health', port: EXPORTER_PORT }, periodSeconds: 10 },
    livenessProbe: {
      httpGet: { path: '/health', port: EXPORTER_PORT },
      periodSeconds: 20,
      failureThreshold: 3,
    },
  }
}

/** The initContainer that writes the ACL file (same image as Redis: sha256sum, sh). */
export function aclInitContainer(cfg: DeployConfig, withReplication: boolean, r: Resources): IContainer {
  return {
    name: 'acl',
    image: cfg.redisImage,
    command: ['sh', '-c', aclInitScript(withReplication)],
    volumeMounts: [
      { name: 'secret', mountPath: SECRET_DIR, readOnly: true },
      { name: 'acl', mountPath: ACL_DIR },
    ],
    resources: resources(r),
    securityContext: CONTAINER_SECURITY,
  }
}

/**
 * Volumes shared by both Redis StatefulSets (data comes from the volumeClaimTemplate), with the
 * StatefulSet's certificate Secret under TLS.
 */
export function redisVolumes(
  cfg: DeployConfig,
  configMap: string,
  tlsSecret: string,
): NonNullable<IPodSpec['volumes']> {
  return [
    { name: 'secret', secret: { secretName: REDIS_USERS_SECRET, defaultMode: 0o400 } },
    { name: 'acl', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    { name: 'conf', configMap: { name: configMap } },
    { name: 'tmp', emptyDir: { sizeLimit: '64Mi' } },
    ...tlsVolumes(cfg, tlsSecret, true),
  ]
}

/** Required one-per-host anti-affinity and a zone spread, for pods labelled `labels`. */
export function spreadOut(
  labels: Record<string, string>,
  zoneSpread: 'DoNotSchedule' | 'ScheduleAnyway',
): Pick<IPodSpec, 'affinity' | 'topologySpreadConstraints'> {
  return {
    affinity: {
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' },
        ],
      },
    },
    topologySpreadConstraints: [
      {
        maxSkew: 1,
        topologyKey: 'topology.kubernetes.io/zone',
        whenUnsatisfiable: zoneSpread,
        labelSelector: { matchLabels: labels },
      },
    ],
  }
}

/**
 * Common redis.conf lines: the port (TLS only in prod), the ACL file, no protected-mode
 * surprises, no disk-based RDB snapshots.
 */
export function baseRedisConf(cfg: DeployConfig, cluster: boolean): string[] {
  return [
    ...tlsRedisConf(cfg, cluster),
    'bind * -::*',
    // With the default user off and every user password-protected, protected-mode adds nothing;
    // the NetworkPolicy is what keeps other pods out.
    'protected-mode no',
    `aclfile ${ACL_DIR}/users.acl`,
    'dir /data',
    'save ""',
    'appendonly yes',
    'aof-use-rdb-preamble yes',
    'auto-aof-rewrite-percentage 100',
    'auto-aof-rewrite-min-size 64mb',
    'enable-debug-command no',
    'enable-module-command no',
    'latency-tracking yes',
    'tcp-keepalive 60',
    `include ${ACL_DIR}/replication.conf`,
  ]
}

/** The data volume of a Redis StatefulSet pod: one ReadWriteOnce claim per pod for the AOF. */
export function dataClaim(
  cfg: DeployConfig,
  labels: Record<string, string>,
  storage: string,
): Omit<IPersistentVolumeClaim, 'apiVersion' | 'kind'> {
  return {
    metadata: { name: 'data', labels },
    spec: {
      accessModes: ['ReadWriteOnce'],
      ...(cfg.storageClassName ? { storageClassName: cfg.storageClassName } : {}),
      resources: { requests: { storage } },
    },
  }
}

/** At most one pod of the set down for voluntary disruptions (drains, upgrades). */
export function onePodAtATime(metadata: IObjectMeta, labels: Record<string, string>): PodDisruptionBudget {
  return new PodDisruptionBudget({ metadata, spec: { maxUnavailable: 1, selector: { matchLabels: labels } } })
}
