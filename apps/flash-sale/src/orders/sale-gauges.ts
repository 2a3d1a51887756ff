import { initSaleSeries, type ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { WORKER_GROUP } from '../redis/keys.js'
import type { GaugeReader } from '../sql/readers.js'
import { readRedisBooks, unitBooks } from './books.js'

/** The last drift reading per sale: a value is exported once two readings in a row agree. */
const lastDrift = new Map<string, number>()

/**
 * The worker's periodic view of each sale: unsettled order events (pending in a consumer or not
 * delivered, counted from the entries), XINFO's lag (shown, never trusted), stock remaining, and
 * the books' drift in units (books.ts), continuously, not only once the queue is drained. A
 * reservation persisted between the Redis and the SQL reading shows as +1 in that reading only:
 * the gauge moves when two readings in a row agree. The orders not kept (dead letters, failures
 * not the buyer's), which reconcile names. And the wallets below zero.
 */
export async function updateSaleGauges(
  redis: RedisClient,
  saleIds: () => Promise<string[]>,
  orders: GaugeReader,
  metrics: ServiceMetrics,
  /** The group draining the streams: RELAY_GROUP when orders go through RabbitMQ. */
  group: string = WORKER_GROUP,
): Promise<void> {
  for (const productId of await saleIds()) {
    initSaleSeries(metrics, productId)
    const r = await readRedisBooks(redis, productId, group)
    metrics.streamPending.set({ product_id: productId }, r.unsettled.length)
    if (r.lag !== undefined) metrics.streamLag.set({ product_id: productId }, r.lag)
    if (r.remaining !== undefined) metrics.stockRemaining.set({ product_id: productId }, r.remaining)
    const units = await unitBooks(redis, orders, productId, group)
    if (units !== undefined) {
      if (lastDrift.get(productId) === units.drift) {
        metrics.drift.set({ product_id: productId }, units.drift)
      }
      lastDrift.set(productId, units.drift)
      // Reservations that were not kept for a reason not the buyer's (issue 37): the drift
      // equation accounts for dead letters, so they need a gauge of their own.
      const failed = await orders.failedNotByBuyer(productId, units.round)
      const notKept = units.deadLettered + Object.values(failed).reduce((a, b) => a + b, 0)
      metrics.notKept.set({ product_id: productId }, notKept)
    }
  }
  // No wallet below zero (the CHECK forbids it; the gauge says it is so).
  metrics.walletBalanceNegative.set(await orders.negativeWallets())
}
