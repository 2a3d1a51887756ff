import { hostname } from 'node:os'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Script } from 'kunci'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { isNoGroup, isRedisOutage } from '../redis/redis-errors.js'
import type { ReplicaAcks } from '../redis/replica-acks.js'
import { DeliveryAttempts } from './delivery-attempts.js'
import { type BatchPhase, type Entry, GroupReads } from './group-reads.js'
import { type MalformedEventError, type OrderEvent, parseOrderEvent } from './order-event.js'
import { type OrderSink, type SinkEntry, type SinkResult, SinkUnavailableError } from './order-sink.js'

const SETTLE = Script.fromFile(new URL('./scripts/settle.lua', import.meta.url))

export { type OrderSink, type SinkEntry, type SinkResult, SinkUnavailableError } from './order-sink.js'

export interface StreamConsumerOptions {
  redis: RedisClient
  sink: OrderSink
  metrics?: ServiceMetrics
  /** This consumer's name in the group. @defaultValue `<hostname>-<pid>` */
  consumer?: string
  /** A pending event idle this long belongs to a dead consumer and is claimed. @defaultValue 15000 */
  claimIdleMs?: number
  /**
   * Failures of one event before it goes to the dead-letter stream: the sink failed it this many
   * times, or this many workers died while persisting it (orders/delivery-attempts.ts). Waiting for
   * a replica, outages of the sink's store and claims never count. @defaultValue 5
   */
  maxDeliveries?: number
  /** Events read per call, handed to the sink as one batch. @defaultValue 500 */
  batchSize?: number
  /** Sleep when no stream had anything. @defaultValue 50 */
  idleMs?: number
  /** Consumer group. @defaultValue WORKER_GROUP */
  group?: string
  /**
   * A batch read is handed on only once a replica holds its events, or once the Cluster's
   * majority shows the sale's master alone (no replica that a failover could promote without
   * them): a failover cannot un-reserve a unit SQL already sold (issue 20). Otherwise the batch
   * stays pending in the group and is read again; if a failover drops it, it is never persisted.
   */
  acks?: ReplicaAcks
  onError?: (err: unknown) => void
}

/**
 * Reads the sales' order streams in a consumer group and gives each batch to its sink. At least
 * once delivery + idempotent sinks = exactly-once effect:
 * - a consumer that dies between the sink and XACK leaves the events pending; another claims
 *   them after `claimIdleMs` (XAUTOCLAIM) and the sink finds them already handled;
 * - an outage of the sink's store: nothing is acknowledged, the consumer backs off and handles
 *   its own pending events first when the store is back; outages never count as failed deliveries,
 *   nor do reads of events held back until a replica has them (delivery-attempts.ts);
 * - an event that keeps failing for another reason goes to the dead-letter stream with the
 *   reason (and is counted), never dropped silently; a malformed one at once.
 *
 * What it asks of the stream (reads held back until durable, claims, dead letters) is
 * group-reads.ts; here is what it does with a batch: triage, the sink, the acknowledgement.
 */
export class StreamConsumer {
  readonly consumer: string
  readonly #o: Required<Omit<StreamConsumerOptions, 'metrics' | 'onError' | 'acks'>> &
    Pick<StreamConsumerOptions, 'metrics' | 'onError' | 'acks'>
  #running: Promise<void> | undefined
  #stopping = false
  #wake: AbortController = new AbortController()
  /** Reported once per outage (through onError), not once per retry. */
  #inOutage = false
  readonly #failures = new Map<string, number>()
  readonly #attempts: DeliveryAttempts
  readonly #reads: GroupReads
  readonly #lastClaim = new Map<string, number>()
  /**
   * Per sale, the next batch, read and confirmed while the sink persisted a full one (read-ahead):
   * the Redis round trips of a batch (read, replica confirmation) overlap the SQL transaction of
   * the one before instead of following it. Its entries are pending in this consumer's name like
   * any batch read: a consumer killed meanwhile leaves them to XAUTOCLAIM, as it leaves the batch in
   * the sink.
   */
  readonly #ahead = new Map<string, Promise<Entry[] | undefined>>()
  /** Sales whose last batch did not end with every event handed on (an event failed, or the sink threw). */
  readonly #unsettled = new Set<string>()
  /**
   * Sales with an acknowledgement that failed since their own pending events were last read: its
   * events are pending, persisted, until that read finds them. Kept apart from #unsettled, which
   * the next clean batch clears while this must hold until that read.
   */
  readonly #unacked = new Set<string>()
  /**
   * Per sale, the acknowledgement (settle.lua) of the batch the sink last persisted, still out: it
   * runs while the next batch is in the sink. One at a time per sale; awaited before the sale's
   * own pending events are read (they would include what it is about to acknowledge) and at stop.
   */
  readonly #settling = new Map<string, Promise<void>>()
  /** Events handed on (settled or relayed) since start. */
  handled = 0

  constructor(options: StreamConsumerOptions) {
    this.#o = {
      consumer: `${hostname()}-${process.pid}`,
      claimIdleMs: 15_000,
      maxDeliveries: 5,
      batchSize: 500,
      idleMs: 50,
      group: WORKER_GROUP,
      ...options,
    }
    this.consumer = this.#o.consumer
    this.#attempts = new DeliveryAttempts(this.#o.redis, this.#o.group)
    this.#reads = new GroupReads({
      ...this.#o,
      timed: (phase, started) => this.#timed(phase, started),
      attemptsKey: (productId) => this.#attempts.key(productId),
    })
  }

  start(saleIds: () => Promise<string[]>): void {
    this.#running ??= this.#loop(saleIds)
  }

  /** Stops reading; the batch in hand (and one read ahead) is finished and acknowledged first. */
  async stop(): Promise<void> {
    this.#stopping = true
    this.#wake.abort()
    await this.#running
  }

  async #loop(saleIds: () => Promise<string[]>): Promise<void> {
    let backoffMs = 100
    let sales: string[] = []
    let salesAt = 0
    while (!this.#stopping) {
      try {
        if (Date.now() - salesAt > 1_000) {
          sales = await saleIds()
          salesAt = Date.now()
        }
        let worked = 0
        let failure: { err: unknown } | undefined
        // One sale's trouble (its master failing over, its stream gone) must not stop the others:
        // each sale is polled on its own, and the round fails only after all were tried.
        for (const productId of sales) {
          if (this.#stopping) break
          try {
            worked += await this.#poll(productId)
          } catch (err) {
            // Nothing to read: the stream or its group is gone (a preload a failover dropped).
            if (!isNoGroup(err)) failure ??= { err }
          }
        }
        if (failure !== undefined && worked === 0) throw failure.err
        if (failure !== undefined) this.#report(failure.err)
        else {
          backoffMs = 100
          this.#inOutage = false
        }
        if (worked === 0) await this.#idle(this.#o.idleMs)
      } catch (err) {
        this.#report(err)
        await this.#idle(backoffMs)
        backoffMs = Math.min(backoffMs * 2, 2_000)
      }
    }
    await this.#allSettled()
    await this.#finishAhead()
    await this.#allSettled()
  }

  async #allSettled(): Promise<void> {
    await Promise.all(this.#settling.values())
  }

  /**
   * At stop, a batch read ahead is in hand too: persisted and acknowledged before the consumer
   * goes, so that a rolling restart does not leave it pending until another consumer's claim
   * (claimIdleMs later). If that fails, it stays pending and is claimed as after a crash.
   */
  async #finishAhead(): Promise<void> {
    for (const [productId, ahead] of this.#ahead) {
      this.#ahead.delete(productId)
      try {
        const entries = await ahead
        if (entries !== undefined && entries.length > 0) await this.#process(productId, entries, false, false)
      } catch (err) {
        this.#report(err)
      }
    }
  }

  /** Redis and sink outages are waited out, and said once; anything else is reported. */
  #report(err: unknown): void {
    const outage = isRedisOutage(err) || err instanceof SinkUnavailableError
    if (!outage || !this.#inOutage) this.#o.onError?.(err)
    this.#inOutage ||= outage
  }

  async #idle(ms: number): Promise<void> {
    if (this.#stopping) return
    await sleep(ms, undefined, { signal: this.#wake.signal }).catch(() => {})
  }

  /**
   * One round on one sale: the batch read ahead if the last one settled cleanly; otherwise own
   * pending events first (they include any batch read ahead), then claims, then new events.
   */
  async #poll(productId: string): Promise<number> {
    const ahead = this.#ahead.get(productId)
    if (ahead !== undefined) {
      this.#ahead.delete(productId)
      // A read ahead that failed leaves its entries (if any were delivered) pending: the round
      // below reads them as its own. One that was held back (undefined) is read again there too.
      const entries = await ahead.catch(() => undefined)
      if (!this.#unsettled.has(productId) && !this.#unacked.has(productId) && entries !== undefined) {
        // Nothing new when it read: this round is over (the next is a full one, with claims).
        return entries.length > 0 ? this.#process(productId, entries, false, true) : 0
      }
      // The last batch left events pending (a failed event, the sink's outage): they come first,
      // with the batch read ahead, in one read of this consumer's own pending events, so a flow of
      // new events cannot keep a failed one from its retries.
    }
    // Own pending events include those of an acknowledgement still out: let it land first.
    await this.#settling.get(productId)
    this.#unacked.delete(productId)
    // Our own pending events: a retry after an outage or a failed settle.
    const own = await this.#reads.read(productId, '0')
    // Held back (not shown durable): nothing more is read for this sale until it is.
    if (own === undefined) return 0
    // Own pending events are not read ahead of: they are read again until none is left.
    if (own.length > 0) return this.#process(productId, own, false, false)
    const now = Date.now()
    if (now - (this.#lastClaim.get(productId) ?? 0) >= this.#o.claimIdleMs / 2) {
      this.#lastClaim.set(productId, now)
      const claimed = await this.#reads.claim(productId, this.#o.claimIdleMs)
      if (claimed === undefined) return 0
      if (claimed.length > 0) return this.#process(productId, claimed, true, false)
    }
    const fresh = await this.#reads.read(productId, '>')
    return fresh !== undefined && fresh.length > 0 ? this.#process(productId, fresh, false, true) : 0
  }

  /** `readAhead`: the batch came from new events ('>'), so the next may be read while it is persisted. */
  async #process(productId: string, entries: Entry[], claimed: boolean, readAhead: boolean): Promise<number> {
    const k = saleKeys(productId)
    // How many workers died while persisting each event. New events ('>') were never attempted
    // by this group; claimed ones and our own read again may have been.
    const died =
      !readAhead || claimed
        ? await this.#attempts.died(
            productId,
            entries.map((e) => e[0]),
          )
        : new Map<string, number>()
    let batch: SinkEntry[] = []
    // An event a worker died on goes to the sink alone, one per round: a death then counts against
    // the event that caused it, never against its batch-mates (which would reach the dead letters
    // with a poison event, answered 200 and persistable). The others stay pending for the next
    // rounds (our own pending events, read again and checked again).
    let suspect: SinkEntry | undefined
    for (const entry of entries) {
      const [id, fields] = entry
      let event: OrderEvent
      try {
        event = parseOrderEvent(productId, id, fields)
      } catch (err) {
        await this.#reads.deadLetter(productId, entry, (err as MalformedEventError).message, 1)
        continue
      }
      const n = died.get(id) ?? 0
      if (n >= this.#o.maxDeliveries) {
        await this.#reads.deadLetter(productId, entry, `a worker died while persisting it, ${n} times`, n)
        continue
      }
      if (n > 0) suspect ??= { id, fields, event }
      else batch.push({ id, fields, event })
    }
    if (suspect) batch = [suspect]
    if (batch.length === 0) return entries.length
    // A full batch: more are likely waiting. The next one is read (and confirmed) while this one
    // is in the sink; #poll takes it if this one settles cleanly.
    if (readAhead && !this.#stopping && entries.length >= this.#o.batchSize && !this.#ahead.has(productId)) {
      const ahead = this.#reads.read(productId, '>')
      ahead.catch(() => {}) // awaited by the next #poll (or #finishAhead); never unhandled meanwhile
      this.#ahead.set(productId, ahead)
    }
    this.#unsettled.add(productId)
    const ids = batch.map((e) => e.id)
    await this.#attempts.begin(productId, ids)
    const sinkStarted = performance.now()
    let results: SinkResult[]
    try {
      results = await this.#o.sink.handle(batch)
    } catch (err) {
      // The attempt ended, with no result (an outage of the sink's store): nothing to count. If
      // this cannot be said, a worker that dies later may be counted once too often.
      await this.#attempts.end(productId, ids).catch(() => {})
      throw err
    }
    this.#timed('sink', sinkStarted)
    let clean = true
    const relayed: string[] = []
    const settled: string[] = []
    const failed: string[] = []
    for (const [i, entry] of batch.entries()) {
      const result = results[i] ?? { kind: 'error', error: new Error('the sink gave no result') }
      if (result.kind === 'handed-on') {
        relayed.push(entry.id)
        continue
      }
      if (result.kind === 'settled') {
        settled.push(entry.id, entry.event.orderId, result.status)
        continue
      }
      clean = false
      failed.push(entry.id)
      const n = (this.#failures.get(entry.id) ?? 0) + 1
      this.#failures.set(entry.id, n)
      this.#o.onError?.(result.error)
      if (n >= this.#o.maxDeliveries) {
        const reason = (result.error as Error)?.message ?? String(result.error)
        await this.#reads.deadLetter(productId, [entry.id, entry.fields], reason, n)
        this.#failures.delete(entry.id)
      }
    }
    // The next batch (read ahead) may go to the sink now; this one's acknowledgement runs beside
    // it. A failure to acknowledge leaves the events pending, persisted: the sale's next round
    // reads them as its own and the sink finds them done (duplicates).
    if (clean) this.#unsettled.delete(productId)
    const previous = this.#settling.get(productId)
    const settling = (async () => {
      await previous
      // One call for the batch: XACK and the orders' statuses (settle.lua), or XACK alone.
      const settleStarted = performance.now()
      if (settled.length > 0)
        await SETTLE.run(
          this.#o.redis,
          [k.orders, k.status, this.#attempts.key(productId)],
          [this.#o.group, ...settled],
        )
      if (relayed.length > 0) {
        await this.#o.redis.xack(k.orders, this.#o.group, ...relayed)
        await this.#attempts.end(productId, relayed)
      }
      // Failed by the sink: counted in memory (#failures), not as a death.
      await this.#attempts.end(productId, failed)
      this.#timed('settle', settleStarted)
      for (let i = 0; i < settled.length; i += 3) this.#failures.delete(settled[i]!)
      for (const id of relayed) this.#failures.delete(id)
      this.handled += settled.length / 3 + relayed.length
    })().catch((err: unknown) => {
      this.#unacked.add(productId)
      this.#report(err)
    })
    this.#settling.set(productId, settling)
    void settling.finally(() => {
      if (this.#settling.get(productId) === settling) this.#settling.delete(productId)
    })
    return entries.length
  }

  /** A batch's phase, for flash_sale_worker_batch_seconds (where a batch's time goes). */
  #timed(phase: BatchPhase, started: number): void {
    this.#o.metrics?.workerBatchSeconds.observe({ phase }, (performance.now() - started) / 1000)
  }
}
