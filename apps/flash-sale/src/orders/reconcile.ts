import type { Db } from '../db/database.js'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { saleCounts } from '../sale/sale-admin.js'
import type { SaleStore } from '../sale/sale-store.js'
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
  db: Db,
  redis: RedisClient | undefined,
  store: SaleStore | undefined,
  /** The group whose backlog counts as "in the queue": the relay's when orders go through RabbitMQ. */
  group = WORKER_GROUP,
) {
  const sales = await db.query<{ product_id: string; per_user_limit: number; sold: number }>(
    'SELECT product_id, per_user_limit, sold FROM sales ORDER BY product_id',
  )
  const report: SaleReconciliation[] = []
  for (const sale of sales.rows) {
    const p = sale.product_id
    const remaining = store ? await store.remaining(p) : undefined
    const dead = redis ? await redis.xlen(saleKeys(p).dead) : 0
    const backlog = redis
      ? await groupBacklog(redis, p, group).catch(() => ({ pending: 0, lag: 0 }))
      : { pending: 0, lag: 0 }
    const counts = (await saleCounts(db, p, remaining, dead))!
    const money = await db.query<{
      payments: string
      paid: string | null
      over_limit: string
      bad_payments: string
    }>(
      `SELECT
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS payments,
         (SELECT sum(pay.amount_cents) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS paid,
         (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2 AND status = 'confirmed'
            GROUP BY user_id HAVING count(*) > $3) u) AS over_limit,
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.status <> 'confirmed') AS bad_payments`,
      [p, counts.round, sale.per_user_limit],
    )
    const wallets = await db.query<{ charged: string | null; paid: string | null }>(
      'SELECT (SELECT sum(charged_cents) FROM wallets) AS charged, (SELECT sum(amount_cents) FROM payments) AS paid',
    )
    const m = money.rows[0]!
    const problems: string[] = []
    const inQueue = backlog.pending + backlog.lag
    if (counts.persisted > counts.stock_total)
      problems.push(`oversold: ${counts.persisted} confirmed > stock ${counts.stock_total}`)
    if (Number(m.payments) !== counts.persisted)
      problems.push(`${m.payments} payments for ${counts.persisted} confirmed orders`)
    if (Number(m.over_limit) > 0)
      problems.push(`${m.over_limit} user(s) hold more than ${sale.per_user_limit} unit(s)`)
    if (Number(m.bad_payments) > 0)
      problems.push(`${m.bad_payments} payment(s) for orders that are not confirmed`)
    if (sale.sold !== counts.persisted)
      problems.push(`sales.sold = ${sale.sold} but ${counts.persisted} confirmed orders`)
    if (Number(wallets.rows[0]?.charged ?? 0) !== Number(wallets.rows[0]?.paid ?? 0)) {
      problems.push('wallet totals differ from the sum of payments')
    }
    if (remaining !== undefined && inQueue === 0) {
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
      reserved_in_redis: remaining === undefined ? null : counts.reserved,
      confirmed: counts.persisted,
      failed: counts.failed - dead,
      dead_letters: dead,
      in_queue: inQueue,
      sold_in_sql: sale.sold,
      payments: Number(m.payments),
      charged_cents: Number(wallets.rows[0]?.charged ?? 0),
      paid_cents: Number(m.paid ?? 0),
      problems,
    })
  }
  return report
}
