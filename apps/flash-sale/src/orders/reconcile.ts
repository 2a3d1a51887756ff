import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { saleCounts } from '../sale/sale-admin.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { OrderStore } from './order-store.js'
import { groupBacklog } from './sale-gauges.js'

export interface SaleReconciliation {
  product_id: string
  round: number
  stock_total: number
  reserved_in_redis: number | null
  /** Units left in Redis (null for redlock: the stock lives in SQL). */
  remaining_in_redis: number | null
  /** Orders holding a unit in SQL (confirmed, reserved, paid). */
  confirmed: number
  failed: number
  dead_letters: number
  in_queue: number
  sold_in_sql: number
  /** Units given back to the sale this round (sales.returned). */
  returned: number
  /** Units SQL gave up that Redis has not taken back yet. */
  returns_pending: number
  payments: number
  charged_cents: number
  paid_cents: number
  /** Wallets whose balance ≠ funded − charged + refunded, and below zero (all wallets, not per sale). */
  wallets_drifting: number
  wallets_negative: number
  problems: string[]
}

/**
 * Compares Redis with SQL for every sale and checks the books the service promises (issue 16):
 * - units: stock_total = sold + remaining + returns still pending (+ dead letters, whose units
 *   wait for an operator), Redis and SQL agreeing once the queue is drained; sales.returned =
 *   the orders whose return is done this round = the orders Redis's returned hash holds;
 * - orders: never more holding a unit than stock, SQL's `sold` equal to them, no user beyond the
 *   per-user limit;
 * - money: every confirmed/paid/refunded order has exactly one payment and no other order has
 *   one; every refunded order has exactly one refund, of what was paid, and no other order has
 *   one; the wallets' charges equal the payments and their refunds the refunds; every wallet's
 *   balance = funded − charged + refunded; no balance below zero.
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
  const books = await orders.walletBooks()
  for (const sale of await orders.sales()) {
    const p = sale.product_id
    const stock = store ? await store.stockView(p) : { remaining: undefined, deadLettered: 0 }
    const backlog = redis
      ? await groupBacklog(redis, p, group).catch(() => ({ pending: 0, lag: 0 }))
      : { pending: 0, lag: 0 }
    const counts = (await saleCounts(orders, p, stock))!
    const sql = (await orders.saleCounts(p))!
    const m = await orders.money(p, counts.round, sale.per_user_limit)
    const problems: string[] = []
    const inQueue = backlog.pending + backlog.lag
    if (counts.persisted > counts.stock_total)
      problems.push(`oversold: ${counts.persisted} orders hold a unit > stock ${counts.stock_total}`)
    if (m.payments !== m.payable) problems.push(`${m.payments} payments for ${m.payable} confirmed orders`)
    if (m.unpaid > 0) problems.push(`${m.unpaid} confirmed/paid/refunded order(s) without a payment`)
    if (m.unrefunded > 0) problems.push(`${m.unrefunded} refunded order(s) without a refund`)
    if (m.badRefunds > 0)
      problems.push(`${m.badRefunds} refund(s) of orders that are not refunded, or not of what was paid`)
    if (m.overLimit > 0) problems.push(`${m.overLimit} user(s) hold more than ${sale.per_user_limit} unit(s)`)
    if (m.badPayments > 0)
      problems.push(`${m.badPayments} payment(s) for orders that are not confirmed, paid or refunded`)
    if (sale.sold !== counts.persisted)
      problems.push(`sales.sold = ${sale.sold} but ${counts.persisted} orders hold a unit`)
    if (sql.returned !== sql.returns_done)
      problems.push(`sales.returned = ${sql.returned} but ${sql.returns_done} orders' returns are done`)
    if (wallets.chargedCents !== wallets.paidCents)
      problems.push('wallet totals differ from the sum of payments')
    if (wallets.walletRefundedCents !== wallets.refundsCents)
      problems.push("the wallets' refunded totals differ from the sum of refunds")
    if (books.driftCount > 0)
      problems.push(
        `${books.driftCount} wallet(s) with balance ≠ funded − charged + refunded: ${books.drifting.join('; ')}`,
      )
    if (books.negative > 0) problems.push(`${books.negative} wallet(s) below zero`)
    if (stock.remaining !== undefined && inQueue === 0) {
      // A pending return may already be in Redis (the worker died, or is about to mark it done,
      // after Redis took the unit back): only those Redis does not hold yet are out of the stock.
      let notInRedis = sql.returns_pending
      let inRedis: number | undefined
      if (redis) {
        const k = saleKeys(p)
        inRedis = await redis.hlen(k.returned)
        const pending = sql.returns_pending > 0 ? await orders.pendingReturnIds(p, counts.round) : []
        if (pending.length > 0) {
          const held = await redis.hmget(k.returned, ...pending)
          notInRedis = held.filter((v) => v === null).length
        }
      }
      const accounted = sale.sold + stock.remaining + notInRedis + stock.deadLettered
      if (accounted !== counts.stock_total)
        problems.push(
          `drift: stock ${counts.stock_total} ≠ sold ${sale.sold} + remaining in Redis ${stock.remaining} + returns pending ${notInRedis}` +
            (stock.deadLettered ? ` + dead letters ${stock.deadLettered}` : ''),
        )
      if (inRedis !== undefined && (inRedis < sql.returned || inRedis > sql.returned + sql.returns_pending))
        problems.push(
          `returned: Redis holds ${inRedis} returned unit(s), SQL ${sql.returned} done and ${sql.returns_pending} pending`,
        )
    }
    report.push({
      product_id: p,
      round: counts.round,
      stock_total: counts.stock_total,
      reserved_in_redis: stock.remaining === undefined ? null : counts.reserved,
      remaining_in_redis: stock.remaining ?? null,
      confirmed: counts.persisted,
      failed: counts.failed - stock.deadLettered,
      dead_letters: stock.deadLettered,
      in_queue: inQueue,
      sold_in_sql: sale.sold,
      returned: sql.returned,
      returns_pending: sql.returns_pending,
      payments: m.payments,
      charged_cents: wallets.chargedCents,
      paid_cents: m.paidCents,
      wallets_drifting: books.driftCount,
      wallets_negative: books.negative,
      problems,
    })
  }
  return report
}
