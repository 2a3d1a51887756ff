import { keySlot } from '../cluster/slot.js'
import { InvalidOptionError } from '../errors.js'
import { integer, object } from '../options.js'
import { type KunciClient, toRedisPort } from '../redis/client.js'
import { lockKeysShareSlot } from '../redis/keys.js'
import type { RedisPort } from '../redis/port.js'
import type { Lock } from './lock.js'
import type { LockManagerOptions } from './lock-options.js'
import type { LockTarget } from './node-ops.js'
import { Redlock } from './redlock.js'

export interface RedisLockOptions extends LockManagerOptions {
  /** A standalone or Cluster client: ioredis, or node-redis v5 connected first (docs/locks.md "Clients"). */
  client: KunciClient
  /**
   * After each grant, `WAIT replicas timeoutMs` for replica acknowledgement. Best effort: it
   * narrows the window in which a failover loses the lock, it does not close it (see docs/locks.md).
   * @defaultValue undefined (no WAIT)
   */
  waitForReplicas?: { replicas: number; timeoutMs: number }
}

/**
 * The same lock API on a single Redis (standalone, or a Cluster client with the lock and fence
 * keys in one hash slot). Correct as long as that one node (or shard master) does not lose its
 * data; use `Redlock` when a node crash must not break mutual exclusion.
 */
export class RedisLock extends Redlock {
  #wait: { replicas: number; timeoutMs: number } | undefined
  #port: RedisPort

  constructor(options: RedisLockOptions) {
    if (options === null || typeof options !== 'object')
      throw new InvalidOptionError('options', 'expected { client }')
    const { client: given, waitForReplicas, ...rest } = options
    // Validated (and wrapped, once per client) here, so a bad client names the option `client`.
    const port = toRedisPort(given, 'client')
    super({ ...rest, clients: [given] })
    this.#port = port
    if (waitForReplicas !== undefined) {
      const w = object<{ replicas?: unknown; timeoutMs?: unknown }>(
        'waitForReplicas',
        waitForReplicas,
        '{ replicas: integer >= 1, timeoutMs: integer >= 1 }',
      )
      this.#wait = {
        replicas: integer('waitForReplicas', w.replicas, { min: 1, hint: 'replicas' }),
        timeoutMs: integer('waitForReplicas', w.timeoutMs, { min: 1, hint: 'timeoutMs' }),
      }
    }
  }

  protected override target(resources: string | readonly string[]): LockTarget {
    const t = super.target(resources)
    if (this.#port.cluster) {
      for (const r of t.resources) {
        if (!lockKeysShareSlot(r)) {
          throw new InvalidOptionError(
            'resources',
            `"${r}" starts with "}", which breaks the hash tag on a cluster`,
          )
        }
      }
      const slot = keySlot(t.lockKeys[0]!)
      if (t.lockKeys.some((k) => keySlot(k) !== slot)) {
        throw new InvalidOptionError(
          'resources',
          'on a Redis Cluster all resources of one lock must share a hash slot: give them a common hash tag, e.g. "{order:42}:a" and "{order:42}:b"',
        )
      }
    }
    return t
  }

  protected override afterGrant(lock: Lock): Promise<void> | undefined {
    if (!this.#wait) return undefined
    const { replicas, timeoutMs } = this.#wait
    const port = this.#port
    const cluster = port.cluster
    let node: Pick<RedisPort, 'send'> | undefined = port
    if (cluster) {
      const owner = cluster.ownerOf(keySlot(lock.target.lockKeys[0]!))
      node = owner === undefined ? undefined : cluster.masters().find((m) => m.address === owner)
    }
    if (!node) return undefined
    // WAIT only counts writes made on the same connection, which is the one the script used.
    return node.send('wait', [replicas, timeoutMs]).then(
      () => undefined,
      () => undefined,
    )
  }
}
