import type { RedisClient } from '../redis/connect.js'
import { WORKER_GROUP } from '../redis/keys.js'
import { saleCounts } from '../sale/sale-admin.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { OrderStore } from './order-store.js'
import { groupBacklog } from './sale-gauges.js'

export interface SaleReconciliation {
  product_id: string
  round: number
  stock_total: number
  reserved_in_redis: number | null
  confirmed: number
  failed: number
  dead_letters: number
  in_queue: number
  sold_in_sql: number
  payments: number
  charged_cents: number
  paid_cents: number
  problems: string[]
}

/**
 * Compares Redis (reserved) with SQL (persisted, charged) for every sale, and checks the
 * invariants the service promises: never more confirmed than stock, one payment per confirmed
 * order, wallets charged exactly the payments, no user beyond the per-user limit, and (once the
 * queue is drained) every reservation settled in SQL.
 */
export async function reconcile(
  orders: OrderStore,
  redis: RedisClient | undefined,
  store: SaleStore | undefined,
  /** The group whose backlog counts as "in the queue": the relay's when orders go through RabbitMQ. */
  group = WORKER_GROUP,
) {
  const report: SaleReconciliation[] = []
  const wallets = await orders.walletTotals()
  for (const sale of await orders.sales()) {
    const p = sale.product_id
    const stock = store ? await store.stockView(p) : { remaining: undefined, deadLettered: 0 }
    const backlog = redis
      ? await groupBacklog(redis, p, group).catch(() => ({ pending: 0, lag: 0 }))
      : { pending: 0, lag: 0 }
    const counts = (await saleCounts(orders, p, stock))!
    const m = await orders.money(p, counts.round, sale.per_user_limit)
    const problems: string[] = []
    const inQueue = backlog.pending + backlog.lag
    if (counts.persisted > counts.stock_total)
      problems.push(`oversold: ${counts.persisted} confirmed > stock ${counts.stock_total}`)
    if (m.payments !== counts.persisted)
      problems.push(`${m.payments} payments for ${counts.persisted} confirmed orders`)
    if (m.overLimit > 0) problems.push(`${m.overLimit} user(s) hold more than ${sale.per_user_limit} unit(s)`)
    if (m.badPayments > 0) problems.push(`${m.badPayments} payment(s) for orders that are not confirmed`)
    if (sale.sold !== counts.persisted)
      problems.push(`sales.sold = ${sale.sold} but ${counts.persisted} confirmed orders`)
    if (wallets.chargedCents !== wallets.paidCents)
      problems.push('wallet totals differ from the sum of payments')
    if (stock.remaining !== undefined && inQueue === 0) {
      const drift = counts.reserved - counts.persisted - counts.failed
      if (drift !== 0)
        problems.push(
          `drift: ${counts.reserved} reserved in Redis, ${counts.persisted + counts.failed} settled in SQL`,
        )
    }
    report.push({
      product_id: p,
      round: counts.round,
      stock_total: counts.stock_total,
      reserved_in_redis: stock.remaining === undefined ? null : counts.reserved,
      confirmed: counts.persisted,
      failed: counts.failed - stock.deadLettered,
      dead_letters: stock.deadLettered,
      in_queue: inQueue,
      sold_in_sql: sale.sold,
      payments: m.payments,
      charged_cents: wallets.chargedCents,
      paid_cents: m.paidCents,
      problems,
    })
  }
  return report
}
