import { createServer } from 'node:http'
import { hostname } from 'node:os'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { Connection } from 'rabbitmq-client'
import type { ServiceConfig } from '../config.js'
import { connectDb } from '../db/database.js'
import { createServiceMetrics, type ServiceMetrics } from '../metrics/service-metrics.js'
import { ackRoute, connectSaleRedis, type RedisClient, whenReady } from '../redis/connect.js'
import { RELAY_GROUP, WORKER_GROUP } from '../redis/keys.js'
import { ReplicaAcks } from '../redis/replica-acks.js'
import { withTimeout } from '../runtime-timeout.js'
import { Restocks } from '../sale/restocks.js'
import { SaleStore } from '../sale/sale-store.js'
import type { GaugeReader } from '../sql/readers.js'
import { AmqpOrderConsumer } from './amqp-consumer.js'
import { AmqpRelay, orderQueues } from './amqp-relay.js'
import { startHoldSweeper } from './hold-sweeper-process.js'
import { OrderStore } from './order-store.js'
import { updateSaleGauges } from './sale-gauges.js'
import { SqlSink } from './sql-sink.js'
import { StreamConsumer } from './stream-consumer.js'
import { UnitReturns } from './unit-returns.js'

/**
 * How long one confirmation round of the worker waits for a replica; a batch not shown durable is
 * held back and read again (stream-consumer.ts), never persisted anyway.
 */
const WORKER_WAIT_MS = 100

/**
 * Every sale the worker serves: Redis's registry (cheap) and SQL's sales (durable). The registry
 * is one key on one master: a sale added while that master was cut off and then deposed is not in
 * it (issue 20: a whole sale's orders were never read), but SQL has every sale that was created.
 */
export function allSaleIds(store: SaleStore, orders: Pick<GaugeReader, 'sales'>): () => Promise<string[]> {
  return async () => {
    const [inRedis, inSql] = await Promise.all([
      store.saleIds().catch(() => [] as string[]),
      orders.sales().then((rows) => rows.map((r) => r.product_id)),
    ])
    return [...new Set([...inRedis, ...inSql])].sort()
  }
}

/**
 * `flash-sale worker`: persists orders from the sales' streams until SIGTERM/SIGINT, then finishes
 * and acknowledges the batch in hand. Serves /metrics, /healthz, /readyz on WORKER_PORT.
 */
export async function runWorker(
  config: ServiceConfig,
  log: (l: string) => void = console.error,
): Promise<void> {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const metrics = createServiceMetrics(registry)
  const redis = connectSaleRedis(config, 'flash-sale-worker')
  const db = connectDb(config.databaseUrl, 10)
  await whenReady(redis)
  const store = new SaleStore(redis)
  const orders = new OrderStore(db, {
    defaultWalletCents: config.defaultWalletBalanceCents,
    onCharge: (result, units) => metrics.payments.inc({ result }, units),
  })
  // The worker's own confirmation rounds (WAIT on their own connections; see replica-acks.ts).
  const acks = new ReplicaAcks(ackRoute(redis, config), { timeoutMs: WORKER_WAIT_MS })
  const onError = (err: unknown) => log(`[flash-sale worker] ${(err as Error).message ?? err}`)
  // Units of orders that failed holding one go back to the sale (issue 16), durably when the
  // sale's master has a replica (the same confirmation rounds as the batches').
  const returns = new UnitReturns({
    db,
    store,
    acks,
    onReturned: (product_id, reason, units) => metrics.unitsReturned.inc({ product_id, reason }, units),
  })
  const consumer = `${hostname()}-${process.pid}`
  const saleIds = allSaleIds(store, orders)
  // QUEUE_URL: stream → relay → RabbitMQ → consumer → SQL, instead of stream → SQL.
  const amqp = config.queueUrl
    ? startAmqpPipeline(config, { redis, orders, store, metrics, consumer, acks, returns, onError })
    : undefined
  const worker = amqp
    ? undefined
    : new StreamConsumer({
        redis,
        sink: new SqlSink({ orders, metrics, strategy: config.strategy, returns, onError }),
        metrics,
        consumer,
        claimIdleMs: config.claimIdleMs,
        maxDeliveries: config.maxDeliveries,
        acks,
        onError,
      })
  worker?.start(saleIds)
  // Hold sales' expiry (issue 16): in every worker, one per sale at a time by kunci's lock.
  const sweeper = startHoldSweeper({ redis, db, returns, metrics, settings: config.holdSweep, log })
  const group = amqp ? RELAY_GROUP : WORKER_GROUP
  const gauges = setInterval(() => {
    updateSaleGauges(redis, saleIds, orders, metrics, group).catch(() => {})
  }, 2_000)
  // Returns a crash (or a Redis outage) left pending, every second: an indexed query that finds
  // nothing almost always. Idempotent, so every worker may run it at once.
  // Restocks recorded in SQL that Redis has not shown durable yet (sale/restocks.ts).
  const restocks = new Restocks({ db, store, acks })
  const resume = startResumingReturns(saleIds, returns, restocks, onError)
  const http = createServer((req, res) => {
    if (req.url === '/metrics') {
      void registry.metrics().then((t) => res.writeHead(200, { 'content-type': registry.contentType }).end(t))
    } else if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}')
    } else if (req.url === '/readyz') {
      void withTimeout(Promise.all([redis.ping(), db.query('SELECT 1')]), 1_000).then(
        () => res.writeHead(200).end('{"ready":true}'),
        () => res.writeHead(503).end('{"ready":false}'),
      )
    } else res.writeHead(404).end()
  })
  await new Promise<void>((resolve) => http.listen(config.workerPort, config.host, resolve))
  const address = http.address()
  log(
    `[flash-sale worker] pid ${process.pid} consuming order streams${amqp ? ` through RabbitMQ queue ${config.queueName}` : ''}; metrics on :${typeof address === 'object' && address ? address.port : config.workerPort}`,
  )
  await new Promise<void>((resolve) => {
    const stop = async () => {
      clearInterval(gauges)
      await sweeper.stop()
      await resume.stop()
      await worker?.stop()
      await amqp?.stop()
      acks.close()
      http.close()
      await db.end().catch(() => {})
      redis.disconnect()
      resolve()
    }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
}

/**
 * The RabbitMQ path inside `flash-sale worker`: the relay (stream → durable queue, publisher
 * confirms, XACK after the confirm) and the consumer (queue → persistOrder → status → ack).
 */
export function startAmqpPipeline(
  config: ServiceConfig,
  deps: {
    redis: RedisClient
    orders: OrderStore
    store: SaleStore
    metrics: ServiceMetrics
    consumer: string
    acks?: ReplicaAcks
    returns?: UnitReturns
    onError: (err: unknown) => void
  },
): { relay: AmqpRelay; consumer: AmqpOrderConsumer; stop(): Promise<void> } {
  const connection = new Connection({
    url: config.queueUrl,
    connectionName: `flash-sale-worker-${deps.consumer}`,
    // Reconnect at least every 5 s (the client's default backs off to 30 s): orders wait for it.
    retryHigh: 5_000,
  })
  connection.on('error', deps.onError)
  const queues = orderQueues(config.queueName, config.maxDeliveries)
  const relay = new AmqpRelay({
    redis: deps.redis,
    connection,
    queues,
    metrics: deps.metrics,
    consumer: deps.consumer,
    claimIdleMs: config.claimIdleMs,
    maxDeliveries: config.maxDeliveries,
    acks: deps.acks,
    onError: deps.onError,
  })
  const consumer = new AmqpOrderConsumer({
    connection,
    redis: deps.redis,
    orders: deps.orders,
    queues,
    metrics: deps.metrics,
    strategy: config.strategy,
    maxDeliveries: config.maxDeliveries,
    returns: deps.returns,
    onError: deps.onError,
  })
  consumer.start()
  relay.start(allSaleIds(deps.store, deps.orders))
  return {
    relay,
    consumer,
    // The relay first: nothing new is published while the consumer drains what it holds.
    stop: async () => {
      await relay.stop()
      await consumer.stop()
      await connection.close()
    },
  }
}

/**
 * Runs UnitReturns.resumePending() and Restocks.resumePending() for every sale once a second, one
 * pass at a time: the returns and restocks an earlier crash, a Redis outage or an unconfirmed
 * replica left pending are finished.
 */
export function startResumingReturns(
  saleIds: () => Promise<string[]>,
  returns: Pick<UnitReturns, 'resumePending'>,
  restocks: Pick<Restocks, 'resumePending'>,
  onError: (err: unknown) => void,
  everyMs = 1_000,
): { stop(): Promise<void> } {
  let stopped = false
  let pass: Promise<void> = Promise.resolve()
  let reported = false
  const run = async () => {
    try {
      for (const productId of await saleIds()) {
        if (stopped) return
        await returns.resumePending(productId)
        await restocks.resumePending(productId)
      }
      reported = false
    } catch (err) {
      // Said once per outage, not once a second.
      if (!reported) onError(err)
      reported = true
    }
  }
  let running = false
  const timer = setInterval(() => {
    // One pass at a time: a slow pass (Redis failing over) is not queued behind by more.
    if (running) return
    running = true
    pass = run().finally(() => {
      running = false
    })
  }, everyMs)
  return {
    async stop() {
      stopped = true
      clearInterval(timer)
      await pass
    },
  }
}
