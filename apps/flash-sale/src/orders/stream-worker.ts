import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Db, isSqlOutage } from '../db/database.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import { type RedisClient, refreshSlots } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { isRedirect, isRedisOutage } from '../redis/redis-errors.js'
import type { ReplicaAcks } from '../redis/replica-acks.js'
import { SCRIPTS } from '../sale/scripts.js'
import { type MalformedEventError, type OrderEvent, parseOrderEvent } from './order-event.js'
import { type PersistOutcome, persistOrder } from './persist.js'

export interface OrderWorkerOptions {
  redis: RedisClient
  db: Db
  metrics?: ServiceMetrics
  /** This worker's consumer name in the group. @defaultValue `<hostname>-<pid>` */
  consumer?: string
  /** A pending event idle this long belongs to a dead worker and is claimed. @defaultValue 15000 */
  claimIdleMs?: number
  /** Failed deliveries of one event before it goes to the dead-letter stream. @defaultValue 5 */
  maxDeliveries?: number
  /** Events read per call. @defaultValue 100 */
  batchSize?: number
  /** Orders persisted at once (SQL connections used). @defaultValue 8 */
  concurrency?: number
  /** Sleep when no stream had anything. @defaultValue 50 */
  idleMs?: number
  /** What persistOrder records as the order's strategy. @defaultValue 'lua' */
  strategy?: string
  /**
   * A custom sink instead of SQL (the AMQP relay publishes instead of persisting). `relayed`:
   * the event was handed on; it is XACKed and its order status is left to whoever persists it.
   */
  handle?: (ev: OrderEvent, entry: { id: string; fields: string[] }) => Promise<HandleOutcome>
  /** Consumer group. @defaultValue WORKER_GROUP */
  group?: string
  /**
   * Best effort: a batch read is persisted once a replica holds its events (or at once if the
   * sale's master has no replica), so a failover cannot un-reserve a unit SQL already sold.
   */
  acks?: ReplicaAcks
  onError?: (err: unknown) => void
}

type Entry = [id: string, fields: string[]]

export type HandleOutcome = PersistOutcome | { kind: 'relayed' }

/**
 * Consumes the sales' order streams in a consumer group and persists each order exactly once
 * (persistOrder is idempotent), then XACKs it and marks it confirmed. At-least-once delivery +
 * idempotent writes = exactly-once effect:
 * - a worker that dies between COMMIT and XACK leaves the event pending; another worker claims it
 *   after `claimIdleMs` (XAUTOCLAIM) and finds the order already written;
 * - SQL down: nothing is acknowledged, the worker backs off and retries its own pending events
 *   first when SQL is back; outages never count as failed deliveries;
 * - an event that keeps failing for another reason goes to the dead-letter stream with the
 *   reason (and is counted), never dropped silently.
 */
export class OrderWorker {
  readonly consumer: string
  readonly #o: Required<Omit<OrderWorkerOptions, 'metrics' | 'handle' | 'onError' | 'acks'>> &
    Pick<OrderWorkerOptions, 'metrics' | 'handle' | 'onError' | 'acks'>
  #running: Promise<void> | undefined
  #stopping = false
  #wake: AbortController = new AbortController()
  readonly #failures = new Map<string, number>()
  readonly #lastClaim = new Map<string, number>()
  #sqlHealthy = true
  #redisHealthy = true
  /** Events persisted (outcome confirmed or duplicate) since start. */
  persisted = 0

  constructor(options: OrderWorkerOptions) {
    this.#o = {
      consumer: `${hostname()}-${process.pid}`,
      claimIdleMs: 15_000,
      maxDeliveries: 5,
      batchSize: 100,
      concurrency: 8,
      idleMs: 50,
      strategy: 'lua',
      group: WORKER_GROUP,
      ...options,
    }
    this.consumer = this.#o.consumer
  }

  get healthy(): boolean {
    return this.#sqlHealthy && this.#redisHealthy
  }

  start(saleIds: () => Promise<string[]>): void {
    this.#running ??= this.#loop(saleIds)
  }

  /** Stops reading; the batch in hand is finished and acknowledged first. */
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
        for (const productId of sales) {
          if (this.#stopping) break
          worked += await this.#poll(productId)
        }
        this.#redisHealthy = true
        backoffMs = 100
        if (worked === 0) await this.#idle(this.#o.idleMs)
      } catch (err) {
        if (isRedisOutage(err)) this.#redisHealthy = false
        else if (isSqlOutage(err)) this.#sqlHealthy = false
        else this.#o.onError?.(err)
        await this.#idle(backoffMs)
        backoffMs = Math.min(backoffMs * 2, 2_000)
      }
    }
  }

  async #idle(ms: number): Promise<void> {
    if (this.#stopping) return
    await sleep(ms, undefined, { signal: this.#wake.signal }).catch(() => {})
  }

  /** One round on one sale: own pending events first, then claims, then new events. */
  async #poll(productId: string): Promise<number> {
    const k = saleKeys(productId)
    const g = this.#o.group
    // Our own pending events: a retry after an SQL outage or a failed settle.
    const own = await this.#read(productId, '0')
    if (own.length > 0) return this.#process(productId, own, false)
    const now = Date.now()
    if (now - (this.#lastClaim.get(productId) ?? 0) >= this.#o.claimIdleMs / 2) {
      this.#lastClaim.set(productId, now)
      const reply = (await this.#o.redis.xautoclaim(
        k.orders,
        g,
        this.consumer,
        this.#o.claimIdleMs,
        '0-0',
        'COUNT',
        this.#o.batchSize,
      )) as [string, (Entry | null)[], string[]?]
      const claimed = (reply[1] ?? []).filter((e): e is Entry => Array.isArray(e))
      if (claimed.length > 0) return this.#process(productId, claimed, true)
    }
    const fresh = await this.#read(productId, '>')
    return fresh.length > 0 ? this.#process(productId, fresh, false) : 0
  }

  async #read(productId: string, from: '0' | '>'): Promise<Entry[]> {
    const k = saleKeys(productId)
    let reply: [string, Entry[]][] | null
    try {
      reply = (await this.#o.redis.xreadgroup(
        'GROUP',
        this.#o.group,
        this.consumer,
        'COUNT',
        this.#o.batchSize,
        'STREAMS',
        k.orders,
        from,
      )) as [string, Entry[]][] | null
    } catch (err) {
      if (isRedirect(err)) await refreshSlots(this.#o.redis)
      throw err
    }
    // Own-history reads list deleted entries as [id, null]: nothing to persist, just acknowledge.
    const entries = reply?.[0]?.[1] ?? []
    const gone = entries.filter((e) => e[1] === null).map((e) => e[0])
    if (gone.length > 0) await this.#o.redis.xack(k.orders, this.#o.group, ...gone)
    const live = entries.filter((e) => e[1] !== null)
    // The confirmation round runs on a connection of its own (redis/replica-acks.ts): a master
    // without a replica costs nothing, a slow one delays only this batch.
    if (live.length > 0) await this.#o.acks?.confirm(k.ackMark)
    return live
  }

  async #deliveries(stream: string, ids: string[]): Promise<Map<string, number>> {
    const counts = new Map<string, number>()
    if (ids.length === 0) return counts
    const sorted = [...ids].sort(compareIds)
    const rows = (await this.#o.redis.xpending(
      stream,
      this.#o.group,
      sorted[0]!,
      sorted.at(-1)!,
      ids.length * 2,
    )) as [string, string, number, number][]
    for (const [id, , , n] of rows) counts.set(id, Number(n))
    return counts
  }

  async #process(productId: string, entries: Entry[], claimed: boolean): Promise<number> {
    const k = saleKeys(productId)
    const deliveries = claimed
      ? await this.#deliveries(
          k.orders,
          entries.map((e) => e[0]),
        )
      : new Map()
    let next = 0
    let outage: unknown
    const runOne = async (entry: Entry): Promise<void> => {
      const [id, fields] = entry
      let ev: OrderEvent
      try {
        ev = parseOrderEvent(productId, id, fields)
      } catch (err) {
        await this.#deadLetter(productId, entry, (err as MalformedEventError).message, 1)
        return
      }
      if (claimed && (deliveries.get(id) ?? 0) > this.#o.maxDeliveries) {
        await this.#deadLetter(
          productId,
          entry,
          'too many deliveries (a worker died on it each time)',
          deliveries.get(id)!,
        )
        return
      }
      try {
        const outcome = await (this.#o.handle ?? ((e) => persistOrder(this.#o.db, e, this.#o.strategy)))(ev, {
          id,
          fields,
        })
        this.#sqlHealthy = true
        if (outcome.kind === 'relayed') {
          await this.#o.redis.xack(k.orders, this.#o.group, id)
          this.#failures.delete(id)
          this.persisted++
          return
        }
        const status =
          outcome.kind === 'confirmed' || (outcome.kind === 'duplicate' && outcome.status === 'confirmed')
            ? 'confirmed'
            : 'failed'
        await SCRIPTS.settle.run(this.#o.redis, [k.orders, k.status], [this.#o.group, id, ev.orderId, status])
        this.#failures.delete(id)
        this.persisted++
        if (outcome.kind === 'confirmed') {
          this.#o.metrics?.ordersPersisted.inc({ product_id: productId })
          this.#o.metrics?.walletCharges.inc()
        } else if (outcome.kind === 'failed') {
          this.#o.metrics?.ordersFailed.inc({ product_id: productId, reason: outcome.reason })
        }
      } catch (err) {
        if (isSqlOutage(err) || isRedisOutage(err)) {
          outage = err
          return
        }
        const n = (this.#failures.get(id) ?? 0) + 1
        this.#failures.set(id, n)
        this.#o.onError?.(err)
        if (n >= this.#o.maxDeliveries) {
          await this.#deadLetter(productId, entry, (err as Error).message ?? String(err), n)
          this.#failures.delete(id)
        }
      }
    }
    const lanes = Array.from({ length: Math.min(this.#o.concurrency, entries.length) }, async () => {
      while (next < entries.length && outage === undefined) await runOne(entries[next++]!)
    })
    await Promise.all(lanes)
    if (outage !== undefined) throw outage
    return entries.length
  }

  async #deadLetter(
    productId: string,
    [id, fields]: Entry,
    reason: string,
    deliveries: number,
  ): Promise<void> {
    const k = saleKeys(productId)
    const orderId = fields[fields.indexOf('order_id') + 1] ?? ''
    await SCRIPTS.deadLetter.run(
      this.#o.redis,
      [k.orders, k.dead, k.status],
      [this.#o.group, id, orderId, reason.slice(0, 500), deliveries, ...fields],
    )
    this.#o.metrics?.deadLetters.inc({ product_id: productId })
  }
}

function compareIds(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-')
  const [bm = '0', bs = '0'] = b.split('-')
  return am === bm ? Number(as) - Number(bs) : Number(BigInt(am) - BigInt(bm) > 0n ? 1 : -1)
}
