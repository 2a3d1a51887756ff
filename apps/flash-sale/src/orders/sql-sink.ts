import { isSqlOutage } from '../db/database.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { OrderStore, PersistOutcome } from './order-store.js'
import { type OrderSink, type SinkEntry, type SinkResult, SinkUnavailableError } from './stream-consumer.js'

export interface SqlSinkOptions {
  orders: OrderStore
  metrics?: ServiceMetrics
  /** Orders persisted at once when a batch is persisted event by event. @defaultValue 8 */
  concurrency?: number
  /** What the order row records as its strategy. @defaultValue 'lua' */
  strategy?: string
}

/**
 * The worker's sink: a batch of one sale's events persisted in one transaction
 * (OrderStore.persistBatch; idempotent, exactly once). If that transaction fails for any reason
 * other than an outage (an event SQL refuses: a poison entry), the batch is persisted again event
 * by event, so the others are written and only the bad one fails (and is dead-lettered after
 * maxDeliveries). SQL down stops the batch (SinkUnavailableError): what was written is found
 * again as a duplicate on the retry.
 */
export class SqlSink implements OrderSink {
  readonly #o: Required<Omit<SqlSinkOptions, 'metrics'>> & Pick<SqlSinkOptions, 'metrics'>

  constructor(options: SqlSinkOptions) {
    this.#o = { concurrency: 8, strategy: 'lua', ...options }
  }

  async handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    let outcomes: PersistOutcome[]
    try {
      outcomes = await this.#o.orders.persistBatch(
        entries.map((e) => e.event),
        this.#o.strategy,
      )
      this.#o.metrics?.sqlBatchSize.observe(entries.length)
    } catch (err) {
      if (isSqlOutage(err)) throw new SinkUnavailableError('SQL', err)
      return this.#oneByOne(entries)
    }
    return entries.map((e, i) => this.#settle(e, outcomes[i]!))
  }

  async #oneByOne(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    const results: SinkResult[] = new Array(entries.length)
    let next = 0
    let outage: unknown
    const lane = async () => {
      while (next < entries.length && outage === undefined) {
        const i = next++
        const e = entries[i]!
        results[i] = await this.#o.orders.persistReserved(e.event, this.#o.strategy).then(
          (outcome) => this.#settle(e, outcome),
          (err: unknown) => {
            if (isSqlOutage(err)) outage = err
            return { kind: 'error', error: err } as const
          },
        )
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#o.concurrency, entries.length) }, lane))
    if (outage !== undefined) throw new SinkUnavailableError('SQL', outage)
    return results
  }

  #settle({ event }: SinkEntry, outcome: PersistOutcome): SinkResult {
    const product_id = event.productId
    switch (outcome.kind) {
      case 'confirmed':
        this.#o.metrics?.ordersPersisted.inc({ product_id })
        this.#o.metrics?.walletCharges.inc()
        return { kind: 'settled', status: 'confirmed' }
      case 'duplicate':
        return { kind: 'settled', status: outcome.status }
      case 'failed':
        this.#o.metrics?.ordersFailed.inc({ product_id, reason: outcome.reason })
        return { kind: 'settled', status: 'failed' }
    }
  }
}
