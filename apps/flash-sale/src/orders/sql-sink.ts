import { performance } from 'node:perf_hooks'
import { isSqlOutage } from '../db/database.js'
import { returnsUnit } from '../domain/order-states.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { OrderBatchWriter, PersistOutcome } from '../sql/order-batches.js'
import { type OrderSink, type SinkEntry, type SinkResult, SinkUnavailableError } from './stream-consumer.js'
import type { PendingReturn, UnitReturns } from './unit-returns.js'

export interface SqlSinkOptions {
  orders: OrderBatchWriter
  metrics?: ServiceMetrics
  /** Orders persisted at once when a batch is persisted event by event. @defaultValue 8 */
  concurrency?: number
  /** What the order row records as its strategy. @defaultValue 'lua' */
  strategy?: string
  /**
   * Where the units of orders that failed holding one (INSUFFICIENT_FUNDS, duplicate_unit) go
   * back to the sale, once the batch is committed. Without it they stay `pending` in SQL until a
   * resumePending() finds them.
   */
  returns?: UnitReturns
  /** A return that could not be made now (Redis down…): it stays pending, resumed later. */
  onError?: (err: unknown) => void
}

/**
 * The worker's sink: a batch of one sale's events persisted in one transaction
 * (sql/order-batches.ts persistBatch; idempotent, exactly once). If that transaction fails for any reason
 * other than an outage (an event SQL refuses: a poison entry), the batch is persisted again event
 * by event, so the others are written and only the bad one fails (and is dead-lettered after
 * maxDeliveries). SQL down stops the batch (SinkUnavailableError): what was written is found
 * again as a duplicate on the retry.
 */
export class SqlSink implements OrderSink {
  readonly #o: Required<Omit<SqlSinkOptions, 'metrics' | 'returns' | 'onError'>> &
    Pick<SqlSinkOptions, 'metrics' | 'returns' | 'onError'>

  constructor(options: SqlSinkOptions) {
    this.#o = { concurrency: 8, strategy: 'lua', ...options }
  }

  async handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    let outcomes: PersistOutcome[]
    const started = performance.now()
    try {
      outcomes = await this.#o.orders.persistBatch(
        entries.map((e) => e.event),
        this.#o.strategy,
      )
      this.#o.metrics?.sqlBatchSize.observe(entries.length)
      this.#o.metrics?.workerBatchSeconds.observe({ phase: 'sql' }, (performance.now() - started) / 1000)
    } catch (err) {
      if (isSqlOutage(err)) throw new SinkUnavailableError('SQL', err)
      const { results, outcomes } = await this.#oneByOne(entries)
      await this.#giveBack(entries, outcomes)
      return results
    }
    const results = entries.map((e, i) => this.#settle(e, outcomes[i]!))
    const returning = performance.now()
    await this.#giveBack(
      entries,
      entries.map((_, i) => outcomes[i]),
    )
    this.#o.metrics?.workerBatchSeconds.observe({ phase: 'returns' }, (performance.now() - returning) / 1000)
    return results
  }

  /**
   * After the commit: the units of orders that failed holding one go back to the sale in Redis
   * (UnitReturns, once per order however often asked), and so do those of redelivered events
   * whose earlier delivery died before the return. Before the events are acknowledged, so a
   * worker killed here leaves the events pending and the returns pending: both are done again.
   * A return that fails now (Redis down) stays pending in SQL for resumePending().
   */
  async #giveBack(entries: readonly SinkEntry[], outcomes: readonly (PersistOutcome | undefined)[]) {
    const returns = this.#o.returns
    if (!returns) return
    const bySale = new Map<string, PendingReturn[]>()
    for (const [i, { event }] of entries.entries()) {
      const o = outcomes[i]
      const reason =
        o?.kind === 'failed' && returnsUnit(o.reason)
          ? o.reason
          : o?.kind === 'duplicate'
            ? o.returnPending
            : undefined
      if (reason === undefined) continue
      const list = bySale.get(event.productId) ?? []
      list.push({ orderId: event.orderId, userId: event.userId, round: event.round, reason })
      bySale.set(event.productId, list)
    }
    for (const [productId, list] of bySale) {
      await returns.give(productId, list).catch((err: unknown) => this.#o.onError?.(err))
    }
  }

  async #oneByOne(
    entries: readonly SinkEntry[],
  ): Promise<{ results: SinkResult[]; outcomes: (PersistOutcome | undefined)[] }> {
    const results: SinkResult[] = new Array(entries.length)
    const persisted: (PersistOutcome | undefined)[] = new Array(entries.length)
    let next = 0
    let outage: unknown
    const lane = async () => {
      while (next < entries.length && outage === undefined) {
        const i = next++
        const e = entries[i]!
        results[i] = await this.#o.orders.persistReserved(e.event, this.#o.strategy).then(
          (outcome) => {
            persisted[i] = outcome
            return this.#settle(e, outcome)
          },
          (err: unknown) => {
            if (isSqlOutage(err)) outage = err
            return { kind: 'error', error: err } as const
          },
        )
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#o.concurrency, entries.length) }, lane))
    if (outage !== undefined) throw new SinkUnavailableError('SQL', outage)
    return { results, outcomes: persisted }
  }

  #settle({ event }: SinkEntry, outcome: PersistOutcome): SinkResult {
    const product_id = event.productId
    switch (outcome.kind) {
      case 'confirmed':
        this.#o.metrics?.ordersPersisted.inc({ product_id })
        this.#o.metrics?.walletCharges.inc()
        return { kind: 'settled', status: 'confirmed' }
      case 'reserved':
        this.#o.metrics?.ordersPersisted.inc({ product_id })
        return { kind: 'settled', status: 'reserved' }
      case 'duplicate':
        return { kind: 'settled', status: outcome.status }
      case 'failed':
        this.#o.metrics?.ordersFailed.inc({ product_id, reason: outcome.reason })
        return { kind: 'settled', status: 'failed' }
    }
  }
}
