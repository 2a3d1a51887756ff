import { RedisLock, Redlock } from 'kunci'
import { connectClients, type DriverConfig, type LockDriver, quitClients } from './driver.js'

/**
 * kunci through its public entry, as a user would. Quarantine is off: the nodes were started
 * seconds ago, and restart quarantine would (correctly) keep them out of every quorum for maxTtlMs.
 * persistence 'none' because the nodes run without AOF, like they do for every peer.
 * kunci's jitter is added on top of the delay ([0, jitter)), so its mean retry delay is
 * 7.5 ms where node-redlock's (± jitter) is 5 ms: the same numbers, not tuned in kunci's favour.
 */
export async function kunciDriver(config: DriverConfig): Promise<LockDriver> {
  const clients = await connectClients(config.nodes, config.clientOptions)
  const options = {
    ttlMs: config.ttlMs,
    retryCount: config.retry.count,
    retryDelayMs: config.retry.delayMs,
    retryJitterMs: config.retry.jitterMs,
    quarantine: false,
    persistence: 'none' as const,
  }
  const locks =
    clients.length === 1
      ? new RedisLock({ client: clients[0]!, ...options })
      : new Redlock({ clients, ...options })
  return {
    library: 'kunci',
    acquire: (key) => locks.acquire(key),
    async close() {
      await locks.close()
      await quitClients(clients)
    },
  }
}
