import { hostname } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { AMQPError, type Cmd, type Connection, type MethodParams, type Publisher } from 'rabbitmq-client'
import { ServiceError } from '../errors.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { RELAY_GROUP, saleKeys } from '../redis/keys.js'
import type { ReplicaAcks } from '../redis/replica-acks.js'
import { type OrderSink, type SinkEntry, type SinkResult, StreamConsumer } from './stream-consumer.js'

/** The body of one order message: the stream entry as the reservation wrote it, and where from. */
export interface OrderMessage {
  product_id: string
  /** The entry's id in `{sale:<id>}:orders`, kept for the dead-letter record. */
  entry_id: string
  /** The entry's flat field/value list, parsed again by the consumer (parseOrderEvent). */
  fields: string[]
}

/** The durable queue of orders and its dead-letter queue, declared alike by relay and consumer. */
export interface OrderQueues {
  queue: string
  deadQueue: string
  /** Both declarations; the broker refuses a redeclaration with other arguments, so one source. */
  declarations: MethodParams[Cmd.QueueDeclare][]
}

/**
 * A quorum queue: durable, replicated when the broker is a cluster, and it counts deliveries
 * (`x-delivery-count`), which a classic queue does not; that count lets the consumer dead-letter
 * a message that killed every worker it was given to. `x-delivery-limit` is only the broker's
 * backstop (a consumer that crashes while dead-lettering): it sends the message to the same
 * dead-letter queue, never drops it.
 */
export function orderQueues(name: string, maxDeliveries: number): OrderQueues {
  const deadQueue = `${name}.dead`
  return {
    queue: name,
    deadQueue,
    declarations: [
      { queue: deadQueue, durable: true, arguments: { 'x-queue-type': 'quorum' } },
      {
        queue: name,
        durable: true,
        arguments: {
          'x-queue-type': 'quorum',
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': deadQueue,
          'x-delivery-limit': maxDeliveries + 5,
        },
      },
    ],
  }
}

/** The broker is unreachable, refused the message (nack) or did not confirm it in time. */
export function isBrokerOutage(err: unknown): boolean {
  return err instanceof AMQPError
}

export class UnroutedOrderError extends ServiceError {
  readonly code = 'E_ORDER_UNROUTED'
  constructor(
    readonly queue: string,
    readonly orderId: string,
  ) {
    super(
      `order ${orderId}: the broker had no queue "${queue}" to route it to; the stream entry stays pending and is published again (check that nobody deleted the queue)`,
    )
  }
}

/** Reported (once per outage) through onError while the relay waits for the broker. */
export class BrokerUnavailableError extends ServiceError {
  readonly code = 'E_BROKER_UNAVAILABLE'
  constructor(
    readonly orderId: string,
    cause: unknown,
  ) {
    super(
      `RabbitMQ did not confirm order ${orderId} (${(cause as Error).message}): orders wait in the stream and are published when the broker is back; check QUEUE_URL and the broker`,
      { cause },
    )
  }
}

export interface AmqpRelayOptions {
  redis: RedisClient
  /** An open rabbitmq-client Connection; the relay creates its own publisher channel on it. */
  connection: Connection
  queues: OrderQueues
  metrics?: ServiceMetrics
  /** Consumer name in the relay group. @defaultValue `<hostname>-<pid>` */
  consumer?: string
  /** A pending entry idle this long belongs to a dead relay and is claimed. @defaultValue 15000 */
  claimIdleMs?: number
  /** Failed publishes of one entry (other than broker outages) before its dead letter. @defaultValue 5 */
  maxDeliveries?: number
  /** Messages awaiting their confirm at once. @defaultValue 8 */
  concurrency?: number
  /** Publish events once a replica holds them (best effort), as the worker persists them. */
  acks?: ReplicaAcks
  onError?: (err: unknown) => void
}

/**
 * The outbox relay: the reservation script cannot publish to RabbitMQ atomically, so the sale's
 * stream stays the outbox. The relay reads it in its own consumer group (`amqp-relay`) and
 * publishes each order as a persistent message with publisher confirms; only a confirmed message
 * is XACKed. A relay killed between confirm and XACK leaves the entry pending and it is published
 * again (by itself from '0', or by another relay through XAUTOCLAIM): at least once, and the
 * consumer persists idempotently, so the effect is exactly once.
 * A broker outage is waited out (the entry is retried, never counted as a failure).
 */
export class AmqpRelay implements OrderSink {
  readonly #consumer: StreamConsumer
  readonly #publisher: Publisher
  readonly #redis: RedisClient
  readonly #queues: OrderQueues
  readonly #concurrency: number
  readonly #returned = new Set<string>()
  readonly #stop = new AbortController()
  readonly #onError: ((err: unknown) => void) | undefined
  #brokerHealthy = true

  constructor(options: AmqpRelayOptions) {
    this.#redis = options.redis
    this.#queues = options.queues
    this.#concurrency = options.concurrency ?? 8
    this.#onError = options.onError
    this.#publisher = options.connection.createPublisher({
      confirm: true,
      queues: options.queues.declarations,
      // mandatory + onReturn: a message the broker could not route is confirmed all the same;
      // it must not be XACKed as if it were queued.
      onReturn: (msg) => {
        if (msg.messageId) this.#returned.add(msg.messageId)
      },
    })
    // The relay is the sink of its own consumer (group amqp-relay): it never writes SQL.
    this.#consumer = new StreamConsumer({
      redis: options.redis,
      sink: this,
      metrics: options.metrics,
      consumer: options.consumer ?? `${hostname()}-${process.pid}`,
      claimIdleMs: options.claimIdleMs ?? 15_000,
      maxDeliveries: options.maxDeliveries ?? 5,
      group: RELAY_GROUP,
      acks: options.acks,
      onError: options.onError,
    })
  }

  /** Consumes every sale `saleIds` lists; the relay group is created on each sale's stream first. */
  start(saleIds: () => Promise<string[]>): void {
    this.#consumer.start(async () => {
      const ids = await saleIds()
      for (const id of ids) await ensureGroup(this.#redis, saleKeys(id).orders, RELAY_GROUP)
      return ids
    })
  }

  /** Stops reading, waits for the confirms in flight, closes the publisher channel. */
  async stop(): Promise<void> {
    this.#stop.abort()
    await this.#consumer.stop()
    await this.#publisher.close()
  }

  /** OrderSink: publishes the batch, `concurrency` messages awaiting their confirm at once. */
  async handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    const results: SinkResult[] = new Array(entries.length)
    let next = 0
    const lane = async () => {
      while (next < entries.length) {
        const i = next++
        results[i] = await this.#publish(entries[i]!).then(
          () => ({ kind: 'handed-on' }) as const,
          (error: unknown) => ({ kind: 'error', error }) as const,
        )
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#concurrency, entries.length) }, lane))
    return results
  }

  async #publish({ id, fields, event: ev }: SinkEntry): Promise<void> {
    const body: OrderMessage = { product_id: ev.productId, entry_id: id, fields }
    let backoffMs = 100
    for (;;) {
      this.#returned.delete(ev.orderId)
      try {
        await this.#publisher.send(
          {
            routingKey: this.#queues.queue,
            mandatory: true,
            durable: true,
            messageId: ev.orderId,
            contentType: 'application/json',
          },
          body,
        )
        // basic.return is emitted on setImmediate, the confirm resolves sooner: let it land.
        await new Promise((resolve) => setImmediate(resolve))
        if (this.#returned.delete(ev.orderId)) throw new UnroutedOrderError(this.#queues.queue, ev.orderId)
        this.#brokerHealthy = true
        return
      } catch (err) {
        // Broker down or refusing: wait it out instead of spending the entry's failed deliveries.
        // On stop the entry stays pending in the group and is published after the restart.
        if (!isBrokerOutage(err) || this.#stop.signal.aborted) throw err
        if (this.#brokerHealthy) this.#onError?.(new BrokerUnavailableError(ev.orderId, err))
        this.#brokerHealthy = false
        await sleep(backoffMs, undefined, { signal: this.#stop.signal }).catch(() => {})
        backoffMs = Math.min(backoffMs * 2, 2_000)
      }
    }
  }
}

/** XGROUP CREATE … '0' MKSTREAM: a group created late still sees every event in the stream. */
export async function ensureGroup(redis: RedisClient, stream: string, group: string): Promise<void> {
  try {
    await redis.xgroup('CREATE', stream, group, '0', 'MKSTREAM')
  } catch (err) {
    // The group exists already: what we want.
    if (!(err instanceof Error && err.message.startsWith('BUSYGROUP'))) throw err
  }
}
