import { isSqlOutage } from '../db/database.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { OrderStore } from './order-store.js'
import { type OrderSink, type SinkEntry, type SinkResult, SinkUnavailableError } from './stream-consumer.js'

export interface SqlSinkOptions {
  orders: OrderStore
  metrics?: ServiceMetrics
  /** Orders persisted at once (SQL connections used). @defaultValue 8 */
  concurrency?: number
  /** What the order row records as its strategy. @defaultValue 'lua' */
  strategy?: string
}

/**
 * The worker's sink: each event persisted exactly once in its own transaction
 * (OrderStore.persistReserved is idempotent), `concurrency` at a time. SQL down stops the batch
 * (SinkUnavailableError): what was written is found again as a duplicate on the retry.
 */
export class SqlSink implements OrderSink {
  readonly #o: Required<Omit<SqlSinkOptions, 'metrics'>> & Pick<SqlSinkOptions, 'metrics'>

  constructor(options: SqlSinkOptions) {
    this.#o = { concurrency: 8, strategy: 'lua', ...options }
  }

  async handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    const results: SinkResult[] = new Array(entries.length)
    let next = 0
    let outage: unknown
    const lane = async () => {
      while (next < entries.length && outage === undefined) {
        const i = next++
        results[i] = await this.#one(entries[i]!).catch((err: unknown) => {
          if (isSqlOutage(err)) outage = err
          return { kind: 'error', error: err } as const
        })
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#o.concurrency, entries.length) }, lane))
    if (outage !== undefined) throw new SinkUnavailableError('SQL', outage)
    return results
  }

  async #one({ event }: SinkEntry): Promise<SinkResult> {
    const outcome = await this.#o.orders.persistReserved(event, this.#o.strategy)
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
