import { keySlot } from '../cluster/slot.js'
import { InvalidOptionError } from '../errors.js'
import { integer, object } from '../options.js'
import { type KunciClient, toRedisPort } from '../redis/client.js'
import { lockKeysShareSlot } from '../redis/keys.js'
import type { RedisPort } from '../redis/port.js'
import type { Lock } from './lock.js'
import type { LockManagerOptions } from './lock-options.js'
import type { LockTarget } from './lock-target.js'
import { Redlock } from './redlock.js'
import { ReplicaWait } from './replica-wait.js'

/**
 * Wait after each grant until `replicas` replicas of the master hold it, at most about
 * `timeoutMs`: one `WAIT` in flight per master, on a connection of kunci's own, shared by the
 * grants made meanwhile (replica-wait.ts). Best effort: it narrows the window in which a
 * failover loses the lock, it does not close it (see docs/locks.md).
 */
export interface WaitForReplicasOptions {
  /** Replicas that must acknowledge. */
  replicas: number
  /** WAIT's timeout, in ms. A grant waits at most for the round in flight and its own. */
  timeoutMs: number
  /**
   * After a round ends with fewer acknowledgements than `replicas` (say the promoted master of a
   * failover has no replica), grants are not confirmed and return at once; one round this often
   * checks whether the replicas are back, in ms. @defaultValue 1000
   */
  probeIntervalMs?: number
}

/** The defaults of `waitForReplicas`. Keep the `@defaultValue` tags above in step with this table. */
const DEFAULT_WAIT_FOR_REPLICAS = Object.freeze({ probeIntervalMs: 1_000 })

export interface RedisLockOptions extends LockManagerOptions {
  /** A standalone or Cluster client: ioredis, or node-redis v5 connected first (docs/locks.md "Clients"). */
  client: KunciClient
  /**
   * After each grant, wait (best effort, bounded) for replica acknowledgement; see
   * `WaitForReplicasOptions`. @defaultValue undefined (no WAIT)
   */
  waitForReplicas?: WaitForReplicasOptions
}

/**
 * The same lock API on a single Redis (standalone, or a Cluster client with the lock and fence
 * keys in one hash slot). Correct as long as that one node (or shard master) does not lose its
 * data; use `Redlock` when a node crash must not break mutual exclusion.
 */
export class RedisLock extends Redlock {
  /** Set with `waitForReplicas` only: without it a grant does no extra work. */
  readonly #replicas: ReplicaWait | undefined
  readonly #port: RedisPort

  constructor(options: RedisLockOptions) {
    if (options === null || typeof options !== 'object')
      throw new InvalidOptionError('options', 'expected { client }')
    const { client: given, waitForReplicas, ...rest } = options
    // Validated (and wrapped, once per client) here, so a bad client names the option `client`.
    const port = toRedisPort(given, 'client')
    super({ ...rest, clients: [given] })
    this.#port = port
    if (waitForReplicas !== undefined) {
      const w = object<{ replicas?: unknown; timeoutMs?: unknown; probeIntervalMs?: unknown }>(
        'waitForReplicas',
        waitForReplicas,
        '{ replicas: integer >= 1, timeoutMs: integer >= 1, probeIntervalMs?: integer >= 1 }',
      )
      this.#replicas = new ReplicaWait(port, this.options.prefix, {
        replicas: integer('waitForReplicas', w.replicas, { min: 1, hint: 'replicas' }),
        timeoutMs: integer('waitForReplicas', w.timeoutMs, { min: 1, hint: 'timeoutMs' }),
        probeIntervalMs: integer(
          'waitForReplicas',
          w.probeIntervalMs ?? DEFAULT_WAIT_FOR_REPLICAS.probeIntervalMs,
          { min: 1, hint: 'probeIntervalMs' },
        ),
        slackMs: this.options.nodeTimeoutMs,
      })
    }
  }

  /** Also closes the connections `waitForReplicas` opened. */
  override async close(): Promise<void> {
    await super.close()
    await this.#replicas?.close()
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
    return this.#replicas?.confirm(lock.resources[0]!, lock.target.lockKeys[0]!)
  }
}
