import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { saleCounts } from '../sale/sale-admin.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { BooksReader } from '../sql/readers.js'
import { type UnitBooks, unitBooks } from './books.js'

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
 * - units: stock_total = sold + remaining + returns still pending + dead letters (their units
 *   wait for an operator) + order events not yet in SQL, each counted from what is there (the
 *   stream's entries and the orders' ids: books.ts), also while the queue is not drained; never
 *   from XINFO's lag, which a failover can leave stale (issue 20); sales.returned =
 *   the orders whose return is done this round = the orders Redis's returned hash holds;
 * - orders: never more holding a unit than stock, SQL's `sold` equal to them, no user beyond the
 *   per-user limit;
 * - money: every confirmed/paid/refunded order has exactly one payment and no other order has
 *   one; every refunded order has exactly one refund, of what was paid, and no other order has
 *   one; the wallets' charges equal the payments and their refunds the refunds; every wallet's
 *   balance = funded − charged + refunded; no balance below zero.
 */
export async function reconcile(
  orders: BooksReader,
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
    // Read from the entries and ids (books.ts), never from XINFO's lag; Redis first, then SQL.
    let units: UnitBooks | undefined
    let unitsUnread: string | undefined
    if (redis && stock.remaining !== undefined) {
      units = await unitBooks(redis, orders, p, group).catch((err: Error) => {
        unitsUnread = err.message
        return undefined
      })
      unitsUnread ??= units === undefined ? 'too many unsettled order events to list' : undefined
    }
    const counts = (await saleCounts(orders, p, stock))!
    const sql = (await orders.saleCounts(p))!
    const m = await orders.money(p, counts.round, sale.per_user_limit)
    const problems: string[] = []
    const inQueue = units?.inQueue ?? 0
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
    // Orders reserved (answered 200, or 202) that ended without a unit through no act of the
    // buyer's (issue 37): each is a broken promise, never "ok".
    for (const [reason, n] of Object.entries(await orders.failedNotByBuyer(p, counts.round)))
      problems.push(`${n} order(s) reserved in Redis then failed ${reason} in SQL (not the buyer's doing)`)
    if (stock.deadLettered > 0)
      problems.push(
        `${stock.deadLettered} order event(s) dead-lettered: reserved in Redis, never persisted (see the dead-letter stream)`,
      )
    if (wallets.chargedCents !== wallets.paidCents)
      problems.push('wallet totals differ from the sum of payments')
    if (wallets.walletRefundedCents !== wallets.refundsCents)
      problems.push("the wallets' refunded totals differ from the sum of refunds")
    if (books.driftCount > 0)
      problems.push(
        `${books.driftCount} wallet(s) with balance ≠ funded − charged + refunded: ${books.drifting.join('; ')}`,
      )
    if (books.negative > 0) problems.push(`${books.negative} wallet(s) below zero`)
    if (store && stock.remaining === undefined)
      problems.push(
        'no stock in Redis for this sale: its preload never ran or a failover dropped it; reset the sale (PUT /admin/sales/:id)',
      )
    if (unitsUnread !== undefined) problems.push(`units not checked: ${unitsUnread}`)
    if (units !== undefined && units.drift !== 0)
      problems.push(
        `drift: stock ${units.stockTotal} ≠ sold ${units.sold} + remaining in Redis ${units.remaining} + returns pending ${units.returnsNotInRedis}` +
          (units.restocksNotInRedis ? ` + restocks pending ${units.restocksNotInRedis}` : '') +
          (units.deadLettered ? ` + dead letters ${units.deadLettered}` : '') +
          (units.inQueue ? ` + order events not yet in SQL ${units.inQueue}` : '') +
          ` (${units.drift > 0 ? `${units.drift} unit(s) missing` : `${-units.drift} unit(s) too many`})`,
      )
    if (redis && stock.remaining !== undefined) {
      const inRedis = await redis.hlen(saleKeys(p).returned)
      if (inRedis < sql.returned || inRedis > sql.returned + sql.returns_pending)
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
