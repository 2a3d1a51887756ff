import { performance } from 'node:perf_hooks'
import { Script } from 'kunci'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { refreshSlots } from '../redis/connect.js'
import { saleKeys } from '../redis/keys.js'
import { isRedirect } from '../redis/redis-errors.js'
import { isDurable, type ReplicaAcks } from '../redis/replica-acks.js'

const DEAD_LETTER = Script.fromFile(new URL('./scripts/dead-letter.lua', import.meta.url))

/** A stream entry as XREADGROUP and XAUTOCLAIM give it. */
export type Entry = [id: string, fields: string[]]

/** A phase of a batch, for flash_sale_worker_batch_seconds. */
export type BatchPhase = 'read' | 'confirm' | 'sink' | 'settle'

export interface GroupReadsOptions {
  redis: RedisClient
  group: string
  consumer: string
  batchSize: number
  /** See StreamConsumerOptions.acks: without it, everything read is handed on at once. */
  acks?: ReplicaAcks
  metrics?: ServiceMetrics
  /** Told the time of each phase a read takes part in. */
  timed: (phase: BatchPhase, started: number) => void
  /** The key of the sale's delivery attempts (delivery-attempts.ts), which a dead letter ends. */
  attemptsKey: (productId: string) => string
}

/**
 * What one consumer of the worker group asks of a sale's order stream (the Redis side of
 * stream-consumer.ts): its own pending entries or new ones, a dead consumer's claimed, each batch
 * handed on only once it is shown durable; and the dead-letter stream.
 *
 * Held back means left pending in the group under this consumer's name: the consumer reads its
 * own pending entries again first, so nothing held back is skipped, and a failover that drops
 * the entries drops them from the group too (they were never answered 200: issue 20).
 */
export class GroupReads {
  constructor(readonly o: GroupReadsOptions) {}

  /** The live entries read, or undefined when they could not be shown durable (held back). */
  async read(productId: string, from: '0' | '>'): Promise<Entry[] | undefined> {
    const { redis, group, consumer, batchSize } = this.o
    const k = saleKeys(productId)
    let reply: [string, Entry[]][] | null
    // The node the read goes to: only a round on that same node shows its entries durable.
    const servedBy = this.o.acks?.nodeOf(k.ackMark)
    const started = performance.now()
    try {
      reply = (await redis.xreadgroup(
        'GROUP',
        group,
        consumer,
        'COUNT',
        batchSize,
        'STREAMS',
        k.orders,
        from,
      )) as [string, Entry[]][] | null
    } catch (err) {
      if (isRedirect(err)) await refreshSlots(redis)
      throw err
    }
    // Own-history reads list deleted entries as [id, null]: nothing to hand on, just acknowledge.
    const entries = reply?.[0]?.[1] ?? []
    const gone = entries.filter((e) => e[1] === null).map((e) => e[0])
    if (gone.length > 0) await redis.xack(k.orders, group, ...gone)
    const live = entries.filter((e) => e[1] !== null)
    // Empty reads are the idle loop's, not a batch's: only reads that found events are timed.
    if (live.length > 0) this.o.timed('read', started)
    // The confirmation round runs on a connection of its own (redis/replica-acks.ts): a master
    // without a replica costs nothing, a slow one delays only this batch. A master that got no
    // acknowledgement and is not shown alone may be cut off from its replica and about to be
    // deposed: what it alone holds is not handed to SQL. The events stay pending in the group
    // (this consumer reads them again first) until a replica holds them or the Cluster shows the
    // master alone; a failover that drops them drops them from the group too.
    if (live.length > 0 && !(await this.durable(productId, servedBy))) return undefined
    return live
  }

  /**
   * A dead consumer's entries, idle `idleMs` or more, claimed in this consumer's name
   * (XAUTOCLAIM); undefined when they could not be shown durable (they stay pending, now ours).
   */
  async claim(productId: string, idleMs: number): Promise<Entry[] | undefined> {
    const { redis, group, consumer, batchSize } = this.o
    const k = saleKeys(productId)
    const servedBy = this.o.acks?.nodeOf(k.ackMark)
    const reply = (await redis.xautoclaim(k.orders, group, consumer, idleMs, '0-0', 'COUNT', batchSize)) as [
      string,
      (Entry | null)[],
      string[]?,
    ]
    const claimed = (reply[1] ?? []).filter((e): e is Entry => Array.isArray(e))
    // A dead consumer's events are no more durable than they were when it read them.
    if (claimed.length > 0 && !(await this.durable(productId, servedBy))) return undefined
    return claimed
  }

  /** Are the events read on the sale's master shown durable (acked, or the master alone)? */
  async durable(productId: string, servedBy: string | undefined): Promise<boolean> {
    const { acks, metrics } = this.o
    if (!acks) return true
    const started = performance.now()
    const durable =
      servedBy !== undefined && isDurable(await acks.confirmOutcome(saleKeys(productId).ackMark, servedBy))
    this.o.timed('confirm', started)
    if (durable) return true
    metrics?.unconfirmedReads.inc({ product_id: productId })
    return false
  }

  /** Moves an entry to the sale's dead-letter stream with the reason (dead-letter.lua), acknowledged. */
  async deadLetter(
    productId: string,
    [id, fields]: Entry,
    reason: string,
    deliveries: number,
  ): Promise<void> {
    const k = saleKeys(productId)
    const orderId = fields[fields.indexOf('order_id') + 1] ?? ''
    await DEAD_LETTER.run(
      this.o.redis,
      [k.orders, k.dead, k.status, this.o.attemptsKey(productId)],
      [this.o.group, id, orderId, reason.slice(0, 500), deliveries, ...fields],
    )
    this.o.metrics?.deadLetters.inc({ product_id: productId })
  }
}
