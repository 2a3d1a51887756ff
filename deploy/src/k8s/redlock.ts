import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import { type DeployConfig, EXPORTER_PORT, REDIS_PORT } from './config.js'
import { baseRedisConf, CONF_DIR, dataClaim, onePodAtATime } from './redis-common.js'
import { redisSetParts } from './redis-set.js'

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
  const { labels, metadata, configMap, headless, template } = redisSetParts(cfg, {
    name: REDLOCK_NAME,
    replicated: false,
    conf,
    servicePorts: [
      { name: 'redis', port: REDIS_PORT, targetPort: 'redis' },
      { name: 'metrics', port: EXPORTER_PORT, targetPort: 'metrics' },
    ],
    zoneSpread: cfg.redlock.zoneSpread,
    redis: {
      command: ['redis-server', `${CONF_DIR}/redis.conf`],
      ports: [{ name: 'redis', containerPort: REDIS_PORT }],
      resources: cfg.redlock.resources,
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
      template,
      volumeClaimTemplates: [dataClaim(cfg, labels, cfg.redlock.storage)],
    },
  })
  const pdb = onePodAtATime(metadata, labels)
  return [configMap, headless, statefulSet, pdb]
}
