// The demo's invariant checker: what the clients were told (the load's 200/202 answers) against
// what SQL holds at the end. The same checks as the integration tests, in the service's own
// terms: oversold, every 200 persisted for the same user, nobody twice, one payment per order.
import type { Db } from '@kunci/flash-sale'
import type { LoadResult } from '../load/result.js'

/** What SQL holds for the current round of one sale. */
export interface SaleLedger {
  round: number
  /** Confirmed orders: order id → user id. */
  confirmed: Map<string, string>
  failed: number
  payments: number
  /** Orders with more than one payment row, plus payments beyond the confirmed orders. */
  doubleCharges: number
  /** Users holding more than one confirmed order of this round. */
  usersTwice: number
  walletMismatch: boolean
}

/**
 * One snapshot (REPEATABLE READ): read while the worker still persists, separate statements
 * would count payments committed after the orders were listed as double charges.
 */
export async function readLedger(db: Db, productId: string): Promise<SaleLedger> {
  const client = await db.connect()
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    const ledger = await readLedgerIn(client, productId)
    await client.query('COMMIT')
    return ledger
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

async function readLedgerIn(db: Pick<Db, 'query'>, productId: string): Promise<SaleLedger> {
  const sale = await db.query<{ round: number }>('SELECT round FROM sales WHERE product_id = $1', [productId])
  const round = sale.rows[0]?.round ?? 0
  const confirmed = await db.query<{ order_id: string; user_id: string }>(
    `SELECT order_id, user_id FROM orders WHERE product_id = $1 AND round = $2 AND status = 'confirmed'`,
    [productId, round],
  )
  const counts = await db.query<{ failed: string; payments: string; paid_orders: string; twice: string }>(
    `SELECT
       (SELECT count(*) FROM orders WHERE product_id = $1 AND round = $2 AND status = 'failed') AS failed,
       (SELECT count(*) FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS payments,
       (SELECT count(DISTINCT p.order_id) FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS paid_orders,
       (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2 AND status = 'confirmed'
          GROUP BY user_id HAVING count(*) > 1) t) AS twice`,
    [productId, round],
  )
  const wallets = await db.query<{ ok: boolean }>(
    'SELECT (SELECT coalesce(sum(charged_cents), 0) FROM wallets) = (SELECT coalesce(sum(amount_cents), 0) FROM payments) AS ok',
  )
  const c = counts.rows[0]!
  const payments = Number(c.payments)
  const paidOrders = Number(c.paid_orders)
  return {
    round,
    confirmed: new Map(confirmed.rows.map((r) => [r.order_id, String(r.user_id)])),
    failed: Number(c.failed),
    payments,
    doubleCharges: payments - paidOrders + Math.max(0, paidOrders - confirmed.rowCount!),
    usersTwice: Number(c.twice),
    walletMismatch: wallets.rows[0]?.ok !== true,
  }
}

/** The invariant figures of one phase and the broken ones, in words. */
export interface PhaseCheck {
  /** Distinct orders answered 200/202 (a double click's echo counts once). */
  sold: number
  /** Units promised beyond the stock (200s, and 202s that persisted), or confirmed in SQL beyond it. */
  oversold: number
  persisted: number
  duplicates: number
  doubleCharges: number
  /** 200 answers with no confirmed order for that user in SQL: a lost order. */
  lost: number
  /** 202 answers (no replica confirmed) that never reached SQL: allowed, reported. */
  unconfirmed202: number
  violations: string[]
  notes: string[]
}

export function checkPhase(load: Pick<LoadResult, 'orders'>, ledger: SaleLedger, stock: number): PhaseCheck {
  const answered = new Map<string, { user: string; status: number }>()
  for (const o of load.orders) {
    const seen = answered.get(o.order_id)
    // A double click may get 200 and 202 for the same order: the stronger answer counts.
    if (!seen || (seen.status === 202 && o.status === 200))
      answered.set(o.order_id, { user: String(o.user_id), status: o.status })
  }
  let promised = 0
  let lost = 0
  let wrongUser = 0
  let unconfirmed202 = 0
  for (const [orderId, a] of answered) {
    const owner = ledger.confirmed.get(orderId)
    if (a.status === 200) {
      promised++
      if (owner === undefined) lost++
      else if (owner !== a.user) wrongUser++
    } else if (owner === undefined) unconfirmed202++
    else promised++
  }
  const persisted = ledger.confirmed.size
  const oversold = Math.max(0, promised - stock, persisted - stock)
  const violations: string[] = []
  if (oversold > 0) violations.push(`oversold ${oversold} unit(s): ${promised} promised for ${stock}`)
  if (lost > 0) violations.push(`${lost} order(s) answered 200 but not persisted`)
  if (wrongUser > 0) violations.push(`${wrongUser} order(s) persisted for another user`)
  if (ledger.usersTwice > 0) violations.push(`${ledger.usersTwice} user(s) bought twice`)
  if (ledger.doubleCharges > 0) violations.push(`${ledger.doubleCharges} double charge(s)`)
  if (ledger.payments !== persisted) violations.push(`${ledger.payments} payments for ${persisted} orders`)
  if (ledger.walletMismatch) violations.push('wallet totals differ from the payments')
  const notes: string[] = []
  if (violations.length === 0) notes.push(`persisted ${persisted} = sold, nobody twice, one payment each`)
  if (unconfirmed202 > 0)
    notes.push(`${unconfirmed202} × 202 (no replica confirmed) lost with the failover, as documented`)
  if (persisted > promised)
    notes.push(`${persisted - promised} order(s) persisted whose answer was lost (503), as documented`)
  if (ledger.failed > 0) notes.push(`${ledger.failed} order(s) refused by the worker's SQL guard`)
  return {
    sold: answered.size,
    oversold,
    persisted,
    duplicates: ledger.usersTwice,
    doubleCharges: ledger.doubleCharges,
    lost,
    unconfirmed202,
    violations,
    notes,
  }
}
