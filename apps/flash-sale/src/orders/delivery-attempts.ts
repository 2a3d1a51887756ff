import { Script } from 'kunci'
import type { RedisClient } from '../redis/connect.js'
import { attemptsKey } from '../redis/keys.js'

const BEGIN = Script.fromFile(new URL('./scripts/begin-attempts.lua', import.meta.url))

/**
 * Workers that died while persisting an order event, per event (issue 37 item 2): what tells a
 * poison event from one that merely waited. Redis's own delivery counter cannot: every re-read of
 * a consumer's pending events raises it (the worker re-reads those it holds back until a replica
 * has them, every ~50 ms), and so does every claim after a restart, outage or not. A worker paused
 * beside a replica, then restarted, dead-lettered orders that had been answered 200.
 *
 * Here an attempt is counted just before a batch goes to the sink (begin-attempts.lua) and
 * uncounted when it ends: in settle.lua when persisted, in dead-letter.lua, and by end() when the
 * sink failed an event (the consumer counts those in memory) or its store was unreachable (not a
 * failure). What remains on an event is one count per worker that died inside an attempt.
 * Hold-backs, outages and claims never count.
 */
export class DeliveryAttempts {
  constructor(
    readonly redis: RedisClient,
    /** The consumer group whose attempts these are. */
    readonly group: string,
  ) {}

  key(productId: string): string {
    return attemptsKey(productId, this.group)
  }

  /** One more attempt begun for each entry of the sale's batch. */
  async begin(productId: string, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await BEGIN.run(this.redis, [this.key(productId)], ids)
  }

  /** These entries' attempts ended without a worker dying in them. */
  async end(productId: string, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.redis.hdel(this.key(productId), ...ids)
  }

  /** Attempts begun and never ended (workers that died in them), per entry; 0 when none. */
  async died(productId: string, ids: readonly string[]): Promise<Map<string, number>> {
    const counts = new Map<string, number>()
    if (ids.length === 0) return counts
    const values = await this.redis.hmget(this.key(productId), ...ids)
    for (const [i, id] of ids.entries()) counts.set(id, Number(values[i] ?? 0))
    return counts
  }
}
