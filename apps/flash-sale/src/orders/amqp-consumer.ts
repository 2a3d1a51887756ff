import { setTimeout as sleep } from 'node:timers/promises'
import { Script } from 'kunci'
import {
  type AsyncMessage,
  type Connection,
  type Consumer,
  ConsumerStatus,
  type Publisher,
} from 'rabbitmq-client'
import { ServiceError } from '../errors.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { attemptsKey, RELAY_GROUP, saleKeys } from '../redis/keys.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import type { OrderBatchWriter } from '../sql/order-batches.js'
import type { OrderMessage, OrderQueues } from './amqp-relay.js'
import { type OrderEvent, parseOrderEvent } from './order-event.js'
import { SqlSink } from './sql-sink.js'
import { SinkUnavailableError } from './stream-consumer.js'
import type { UnitReturns } from './unit-returns.js'

const SET_STATUS = Script.fromFile(new URL('./scripts/set-status.lua', import.meta.url))
const DEAD_LETTER = Script.fromFile(new URL('./scripts/dead-letter.lua', import.meta.url))

export interface AmqpOrderConsumerOptions {
  /** An open rabbitmq-client Connection; the consumer opens its own channels on it. */
  connection: Connection
  redis: RedisClient
  orders: OrderBatchWriter
  queues: OrderQueues
  metrics?: ServiceMetrics
  /** What the order row records as its strategy. @defaultValue 'lua' */
  strategy?: string
  /** Deliveries of one message before it goes to the dead-letter queue. @defaultValue 5 */
  maxDeliveries?: number
  /** Messages handled at once (SQL connections used); prefetch is twice this. @defaultValue 8 */
  concurrency?: number
  /** Gives back the units of orders that failed holding one (see SqlSink). */
  returns?: UnitReturns
  onError?: (err: unknown) => void
}

export const DEFAULT_AMQP_CONSUMER_OPTIONS = Object.freeze({
  strategy: 'lua',
  maxDeliveries: 5,
  concurrency: 8,
})

/** An order message the consumer cannot read; it is dead-lettered at once (retrying cannot help). */
export class MalformedOrderMessageError extends ServiceError {
  readonly code = 'E_MALFORMED_ORDER_MESSAGE'
  constructor(why: string) {
    super(`order message: ${why}; it was moved to the dead-letter queue, inspect it there`)
  }
}

/**
 * Consumes the durable order queue with manual acknowledgements: the SQL sink (idempotent, one
 * transaction), then the order's Redis status becomes confirmed/failed (set-status.lua), then
 * the ack. A worker killed anywhere before the ack gets the message redelivered, and the second
 * persist finds the order already written: exactly-once effect, no double charge.
 * - SQL or Redis down: the message is held and retried with backoff, never counted as a failure;
 * - any other error: nack with requeue; once the broker's delivery count (or this process's own
 *   count) reaches `maxDeliveries`, the message is published to the dead-letter queue with the
 *   reason, recorded in the sale's dead-letter stream (the order becomes failed), counted in
 *   `flash_sale_dead_letters_total`, then acked: never dropped, never handled twice.
 */
export class AmqpOrderConsumer {
  readonly #o: Required<Omit<AmqpOrderConsumerOptions, 'metrics' | 'onError' | 'returns'>> &
    Pick<AmqpOrderConsumerOptions, 'metrics' | 'onError' | 'returns'>
  readonly #dead: Publisher
  readonly #sink: SqlSink
  readonly #failures = new Map<string, number>()
  readonly #stop = new AbortController()
  #consumer: Consumer | undefined
  /** Messages persisted (confirmed, failed or duplicate) and acked since start. */
  persisted = 0
  /** Messages moved to the dead-letter queue since start. */
  deadLettered = 0

  constructor(options: AmqpOrderConsumerOptions) {
    this.#o = { ...DEFAULT_AMQP_CONSUMER_OPTIONS, ...options }
    this.#dead = options.connection.createPublisher({ confirm: true, queues: options.queues.declarations })
    // The same sink as the stream worker's, one message at a time (the broker's concurrency).
    this.#sink = new SqlSink({
      orders: options.orders,
      metrics: options.metrics,
      strategy: this.#o.strategy,
      returns: options.returns,
      onError: options.onError,
    })
  }

  start(): void {
    if (this.#consumer) return
    const { concurrency } = this.#o
    this.#consumer = this.#o.connection.createConsumer(
      {
        queue: this.#o.queues.queue,
        queueOptions: this.#o.queues.declarations.at(-1),
        qos: { prefetchCount: concurrency * 2 },
        concurrency,
        requeue: true,
      },
      (msg) => this.#handle(msg),
    )
    this.#consumer.on('error', (err) => this.#o.onError?.(err))
  }

  /** Stops consuming; handlers in progress finish (or requeue, if waiting out an outage). */
  async stop(): Promise<void> {
    this.#stop.abort()
    await this.#consumer?.close()
    await this.#dead.close()
  }

  async #handle(msg: AsyncMessage): Promise<ConsumerStatus> {
    const key = msg.messageId ?? `${msg.deliveryTag}`
    const deliveries = Math.max(brokerDeliveries(msg), this.#failures.get(key) ?? 0) + 1
    let body: OrderMessage | undefined
    let ev: OrderEvent
    try {
      body = readMessage(msg.body)
      ev = parseOrderEvent(body.product_id, body.entry_id, body.fields)
    } catch (err) {
      return this.#deadLetter(msg, body, (err as Error).message, deliveries)
    }
    if (deliveries > this.#o.maxDeliveries) {
      return this.#deadLetter(msg, body, 'too many deliveries (a worker died on it each time)', deliveries)
    }
    let backoffMs = 100
    for (;;) {
      try {
        await this.#persist(ev, body)
        this.#failures.delete(key)
        return ConsumerStatus.ACK
      } catch (err) {
        if (err instanceof SinkUnavailableError || isRedisOutage(err)) {
          // Hold the message: an outage is not the message's fault and must not use up its
          // deliveries. On stop it goes back to the queue for the next worker.
          if (this.#stop.signal.aborted) return ConsumerStatus.REQUEUE
          await sleep(backoffMs, undefined, { signal: this.#stop.signal }).catch(() => {})
          backoffMs = Math.min(backoffMs * 2, 2_000)
          continue
        }
        this.#o.onError?.(err)
        this.#failures.set(key, deliveries)
        if (deliveries >= this.#o.maxDeliveries) {
          return this.#deadLetter(msg, body, (err as Error).message ?? String(err), deliveries)
        }
        return ConsumerStatus.REQUEUE
      }
    }
  }

  async #persist(ev: OrderEvent, body: OrderMessage): Promise<void> {
    const [result] = await this.#sink.handle([{ id: body.entry_id, fields: body.fields, event: ev }])
    if (result?.kind !== 'settled') throw result?.kind === 'error' ? result.error : new Error('no result')
    await SET_STATUS.run(this.#o.redis, [saleKeys(ev.productId).status], [ev.orderId, result.status])
    this.persisted++
  }

  /**
   * Confirmed publish to the dead-letter queue first, then the sale's dead-letter stream (which
   * also marks the order failed, as the reconcile counts expect), then the ack. A crash in between
   * redelivers the message and dead-letters it again: a duplicate dead letter, never a lost one.
   */
  async #deadLetter(
    msg: AsyncMessage,
    body: OrderMessage | undefined,
    reason: string,
    deliveries: number,
  ): Promise<ConsumerStatus> {
    try {
      await this.#dead.send(
        {
          routingKey: this.#o.queues.deadQueue,
          durable: true,
          messageId: msg.messageId,
          contentType: msg.contentType,
          headers: { 'x-reason': reason.slice(0, 500), 'x-deliveries': deliveries },
        },
        msg.body,
      )
      if (body) {
        const k = saleKeys(body.product_id)
        const orderId = body.fields[body.fields.indexOf('order_id') + 1] ?? ''
        // The relay group's XACK in the script finds the entry acknowledged already (returns 0).
        await DEAD_LETTER.run(
          this.#o.redis,
          [k.orders, k.dead, k.status, attemptsKey(body.product_id, RELAY_GROUP)],
          [RELAY_GROUP, body.entry_id, orderId, reason.slice(0, 500), deliveries, ...body.fields],
        )
      }
    } catch (err) {
      // Could not record it: back to the queue, dead-lettered on a later delivery.
      this.#o.onError?.(err)
      return ConsumerStatus.REQUEUE
    }
    this.#failures.delete(msg.messageId ?? `${msg.deliveryTag}`)
    this.deadLettered++
    this.#o.metrics?.deadLetters.inc({ product_id: body?.product_id ?? 'unknown' })
    return ConsumerStatus.ACK
  }
}

/**
 * Earlier deliveries of this message as the quorum queue counts them: `x-delivery-count` (failed
 * deliveries, RabbitMQ 3.8+) or `x-acquired-count` (every delivery, RabbitMQ 4.0+).
 */
function brokerDeliveries(msg: AsyncMessage): number {
  const h = msg.headers ?? {}
  const n = Math.max(Number(h['x-delivery-count'] ?? 0), Number(h['x-acquired-count'] ?? 0))
  return Number.isFinite(n) ? n : 0
}

function readMessage(raw: unknown): OrderMessage {
  let value = raw
  if (Buffer.isBuffer(value)) value = value.toString('utf8')
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value)
    } catch {
      throw new MalformedOrderMessageError('the body is not JSON')
    }
  }
  const m = value as Partial<OrderMessage> | null
  if (
    !m ||
    typeof m.product_id !== 'string' ||
    typeof m.entry_id !== 'string' ||
    !Array.isArray(m.fields) ||
    !m.fields.every((f) => typeof f === 'string')
  ) {
    throw new MalformedOrderMessageError('expected { product_id, entry_id, fields: string[] }')
  }
  return m as OrderMessage
}
