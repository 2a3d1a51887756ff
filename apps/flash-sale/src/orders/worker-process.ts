import { createServer } from 'node:http'
import { hostname } from 'node:os'
import { collectDefaultMetrics, Registry } from 'prom-client'
import type { ServiceConfig } from '../config.js'
import { connectDb } from '../db/database.js'
import { createServiceMetrics } from '../metrics/service-metrics.js'
import { connectSaleRedis } from '../redis/connect.js'
import { withTimeout } from '../runtime.js'
import { SaleStore } from '../sale/sale-store.js'
import { updateSaleGauges } from './sale-gauges.js'
import { OrderWorker } from './stream-worker.js'

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
  const store = new SaleStore(redis)
  const worker = new OrderWorker({
    redis,
    db,
    metrics,
    consumer: `${hostname()}-${process.pid}`,
    claimIdleMs: config.claimIdleMs,
    maxDeliveries: config.maxDeliveries,
    strategy: config.strategy,
    onError: (err) => log(`[flash-sale worker] ${(err as Error).message ?? err}`),
  })
  worker.start(() => store.saleIds())
  const gauges = setInterval(() => {
    updateSaleGauges(redis, store, db, metrics).catch(() => {})
  }, 2_000)
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
    `[flash-sale worker] pid ${process.pid} consuming order streams; metrics on :${typeof address === 'object' && address ? address.port : config.workerPort}`,
  )
  await new Promise<void>((resolve) => {
    const stop = async () => {
      clearInterval(gauges)
      await worker.stop()
      http.close()
      await db.end().catch(() => {})
      redis.disconnect()
      resolve()
    }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
}
