import type { OrderStatus } from '../domain/order-states.js'
import { ServiceError } from '../errors.js'
import type { OrderEvent } from './order-event.js'

/** One stream entry handed to a sink, parsed. */
export interface SinkEntry {
  id: string
  fields: string[]
  event: OrderEvent
}

/**
 * What became of one event: `settled` — persisted in SQL (now or by an earlier delivery): XACK and
 * set the order's status in Redis (left as is for `reserved`: a held order is answered from SQL); `handed-on` — relayed (RabbitMQ): XACK, its status is set by whoever
 * persists it; `error` — it failed this time: counted towards its dead letter.
 */
export type SinkResult =
  | { kind: 'settled'; status: OrderStatus }
  | { kind: 'handed-on' }
  | { kind: 'error'; error: unknown }

/** Where a sale's events go: SQL (sql-sink.ts) or the AMQP relay (amqp-relay.ts). */
export interface OrderSink {
  /**
   * One sale's events, in stream order; one result per event, in the same order. Throws
   * SinkUnavailableError for an outage of the sink's own store (SQL down, …): nothing of the batch
   * is acknowledged, the consumer backs off and the batch comes again, never counted as a failed
   * delivery.
   */
  handle(entries: readonly SinkEntry[]): Promise<SinkResult[]>
}

/** The sink's store is unreachable: the batch waits, nothing is counted as failed. */
export class SinkUnavailableError extends ServiceError {
  readonly code = 'E_SINK_UNAVAILABLE'
  constructor(what: string, cause: unknown) {
    super(
      `${what} is unreachable (${(cause as Error)?.message ?? cause}); the order events wait in the stream`,
      {
        cause,
      },
    )
  }
}
