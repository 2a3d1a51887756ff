import { initSaleSeries, type ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { saleCounts } from '../sale/sale-admin.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { OrderStore } from './order-store.js'

/** XINFO GROUPS → the group's pending and lag (Redis ≥ 7.0 reports lag). */
export async function groupBacklog(redis: RedisClient, productId: string, group = WORKER_GROUP) {
  const groups = (await redis.xinfo('GROUPS', saleKeys(productId).orders)) as unknown[][]
  for (const g of groups) {
    const f = new Map<string, unknown>()
    for (let i = 0; i + 1 < g.length; i += 2) f.set(String(g[i]), g[i + 1])
    if (f.get('name') === group) {
      const lag = f.get('lag')
      return {
        pending: Number(f.get('pending') ?? 0),
        lag: lag === null || lag === undefined ? 0 : Number(lag),
      }
    }
  }
  return { pending: 0, lag: 0 }
}

/**
 * The worker's periodic view of each sale: stream pending and lag, stock remaining, and the drift
 * between Redis and SQL once the queue is drained (stock − sold − remaining − returns pending −
 * dead letters; 0 when sound), and the wallets below zero.
 */
export async function updateSaleGauges(
  redis: RedisClient,
  store: SaleStore,
  orders: OrderStore,
  metrics: ServiceMetrics,
  /** The group draining the streams: RELAY_GROUP when orders go through RabbitMQ. */
  group: string = WORKER_GROUP,
): Promise<void> {
  for (const productId of await store.saleIds()) {
    initSaleSeries(metrics, productId)
    const backlog = await groupBacklog(redis, productId, group)
    metrics.streamPending.set({ product_id: productId }, backlog.pending)
    metrics.streamLag.set({ product_id: productId }, backlog.lag)
    const stock = await store.stockView(productId)
    if (stock.remaining !== undefined) metrics.stockRemaining.set({ product_id: productId }, stock.remaining)
    if (backlog.pending === 0 && backlog.lag === 0) {
      const counts = await saleCounts(orders, productId, stock)
      // reconcile's unit check: stock_total − (sold + remaining + returns pending + dead letters).
      if (counts)
        metrics.drift.set(
          { product_id: productId },
          counts.reserved - counts.persisted - counts.returns_pending - stock.deadLettered,
        )
    }
  }
  // No wallet below zero (the CHECK forbids it; the gauge says it is so).
  metrics.walletBalanceNegative.set(await orders.negativeWallets())
}
