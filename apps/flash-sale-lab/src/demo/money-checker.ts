// The money phases' checker (issue 16): what the clients were told and did (checkouts answered
// 200/202, pays, cancels) against what SQL and Redis hold once the worker and the expiry sweeper
// are done. The books, in the service's terms (docs/flash-sale.md, "Money and the life of an order"):
//   sold      = units held by orders in SQL (confirmed + reserved + paid): sales.sold
//   returned  = units given back to the sale this round (sales.returned: failed with
//               INSUFFICIENT_FUNDS or duplicate_unit, cancelled, expired), each once
//   remaining = the sale's stock in Redis (GET /admin/sales/:id)
//   pending   = returns SQL gave up that Redis has not taken back yet (0 once drained)
// and the "stock = sold + returned + remaining" is checked as the two equations it stands
// for: units ever reserved = sold + returned + pending (no unit lost, none returned twice), and
// stock_total = sold + remaining + pending (Redis and SQL agree).
import type { Db } from '@kunci/flash-sale'
import type { LoadResult, PaymentOutcome } from '../load/result.js'
import type { MoneyFigures } from '../report/report-input.js'

/** What SQL holds for the current round of one sale, and for the wallets of the phase's users. */
export interface MoneyLedger {
  round: number
  payment: 'instant' | 'hold'
  stockTotal: number
  /** sales.sold and sales.returned. */
  sold: number
  returned: number
  /** Orders of the round: order id → user id and status. */
  orders: Map<string, { user: string; status: string }>
  /** Orders by status (and failure reason, as `failed:<reason>`). */
  byStatus: Record<string, number>
  /** Orders whose unit is back (unit_return 'done') or on its way ('pending'). */
  returnsDone: number
  returnsPending: number
  /** Orders that ended without their unit but with no return recorded (a lost unit). */
  returnsMissing: number
  /** Users holding more than one unit of this round. */
  usersTwice: number
  /** confirmed/paid orders without a payment; payments of orders that did not end paid. */
  paidWithoutPayment: number
  paymentsForUnpaid: number
  /** Orders with more than one payment row (the primary key forbids it; counted all the same). */
  doubleCharges: number
  wallets: {
    count: number
    balanceCents: number
    minBalanceCents: number
    fundedCents: number
    chargedCents: number
    refundedCents: number
    /** Wallets whose balance ≠ funded − charged + refunded. */
    unbalanced: number
    /** Every payment these users ever made. */
    paymentsCents: number
  }
}

/** Orders that hold a unit (SQL's `sold` counts them). */
const HOLDING = ['confirmed', 'reserved', 'paid']
/** Endings that give the unit back (domain/order-states.ts returnsUnit, cancel, expiry). */
const RETURNING = `(status IN ('cancelled', 'expired') OR (status = 'failed' AND failure_reason IN ('INSUFFICIENT_FUNDS', 'duplicate_unit')))`

/** One REPEATABLE READ snapshot, like readLedger. */
export async function readMoneyLedger(
  db: Db,
  productId: string,
  userIds: readonly string[],
): Promise<MoneyLedger> {
  const client = await db.connect()
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    const sale = await client.query<{
      round: number
      payment: 'instant' | 'hold'
      stock_total: number
      sold: number
      returned: number
    }>('SELECT round, payment, stock_total, sold, returned FROM sales WHERE product_id = $1', [productId])
    const s = sale.rows[0]
    const round = s?.round ?? 0
    const orders = await client.query<{ order_id: string; user_id: string; status: string }>(
      'SELECT order_id, user_id, status FROM orders WHERE product_id = $1 AND round = $2',
      [productId, round],
    )
    const statuses = await client.query<{ status: string; reason: string | null; n: string }>(
      `SELECT status, failure_reason AS reason, count(*) AS n FROM orders
       WHERE product_id = $1 AND round = $2 GROUP BY 1, 2`,
      [productId, round],
    )
    const c = await client.query<Record<string, string>>(
      `SELECT
         count(*) FILTER (WHERE unit_return = 'done') AS done,
         count(*) FILTER (WHERE unit_return = 'pending') AS pending,
         count(*) FILTER (WHERE ${RETURNING} AND unit_return IS NULL) AS missing,
         count(*) FILTER (WHERE status IN ('confirmed', 'paid')
           AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id)) AS unpaid,
         count(*) FILTER (WHERE status NOT IN ('confirmed', 'paid')
           AND EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id)) AS charged_unpaid,
         (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2
            AND status = ANY($3) GROUP BY user_id HAVING count(*) > 1) t) AS twice,
         (SELECT count(*) FROM (SELECT p.order_id FROM payments p JOIN orders x USING (order_id)
            WHERE x.product_id = $1 AND x.round = $2 GROUP BY p.order_id HAVING count(*) > 1) t) AS doubles
       FROM orders o WHERE product_id = $1 AND round = $2`,
      [productId, round, HOLDING],
    )
    const w = await client.query<Record<string, string | null>>(
      `SELECT count(*) AS count, coalesce(sum(balance_cents), 0) AS balance, min(balance_cents) AS min,
         coalesce(sum(funded_cents), 0) AS funded, coalesce(sum(charged_cents), 0) AS charged,
         coalesce(sum(refunded_cents), 0) AS refunded,
         count(*) FILTER (WHERE balance_cents <> funded_cents - charged_cents + refunded_cents) AS unbalanced,
         (SELECT coalesce(sum(amount_cents), 0) FROM payments WHERE user_id = ANY($1)) AS payments
       FROM wallets WHERE user_id = ANY($1)`,
      [userIds],
    )
    await client.query('COMMIT')
    const byStatus: Record<string, number> = {}
    for (const r of statuses.rows) {
      const key = r.status === 'failed' ? `failed:${r.reason ?? 'unknown'}` : r.status
      byStatus[key] = (byStatus[key] ?? 0) + Number(r.n)
    }
    const k = c.rows[0]!
    const wr = w.rows[0]!
    return {
      round,
      payment: s?.payment ?? 'instant',
      stockTotal: s?.stock_total ?? 0,
      sold: s?.sold ?? 0,
      returned: s?.returned ?? 0,
      orders: new Map(orders.rows.map((r) => [r.order_id, { user: String(r.user_id), status: r.status }])),
      byStatus,
      returnsDone: Number(k.done),
      returnsPending: Number(k.pending),
      returnsMissing: Number(k.missing),
      usersTwice: Number(k.twice),
      paidWithoutPayment: Number(k.unpaid),
      paymentsForUnpaid: Number(k.charged_unpaid),
      doubleCharges: Number(k.doubles),
      wallets: {
        count: Number(wr.count),
        balanceCents: Number(wr.balance),
        minBalanceCents: wr.min === null ? 0 : Number(wr.min),
        fundedCents: Number(wr.funded),
        chargedCents: Number(wr.charged),
        refundedCents: Number(wr.refunded),
        unbalanced: Number(wr.unbalanced),
        paymentsCents: Number(wr.payments),
      },
    }
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

/** What the demo knows besides SQL: the stock in Redis and what it put in the wallets. */
export interface MoneyContext {
  /** Redis stock at the end (GET /admin/sales/:id `remaining`); null if it could not be read. */
  remaining: number | null
  /** Σ of the balances the phase set (PUT /admin/wallets), in cents. */
  setCents: number
  /** Users the phase funded. */
  users: number
  price: number
  holdSeconds?: number
}

export interface MoneyCheck {
  /** Distinct orders answered 200/202. */
  sold: number
  persisted: number
  oversold: number
  duplicates: number
  doubleCharges: number
  lost: number
  money: MoneyFigures
  violations: string[]
  notes: string[]
}

const count = (m: Record<string, number>, k: string) => m[k] ?? 0
const money = (cents: number) => (cents / 100).toFixed(2)

export function checkMoneyPhase(
  load: Pick<LoadResult, 'orders' | 'users'>,
  ledger: MoneyLedger,
  ctx: MoneyContext,
): MoneyCheck {
  const answered = new Map<string, string>()
  for (const o of load.orders) answered.set(o.order_id, String(o.user_id))
  let lost = 0
  let wrongUser = 0
  for (const [orderId, user] of answered) {
    const row = ledger.orders.get(orderId)
    if (row === undefined) lost++
    else if (row.user !== user) wrongUser++
  }
  // What each user was told after its checkout, against the order's end in SQL.
  const payments: Partial<Record<PaymentOutcome, number>> = {}
  let toldPaidNotPaid = 0
  let toldCancelledNot = 0
  let unpaidNotExpired = 0
  for (const u of load.users) {
    if (u.payment === undefined) continue
    payments[u.payment] = (payments[u.payment] ?? 0) + 1
    const status = u.order_id === null ? undefined : ledger.orders.get(u.order_id)?.status
    if (u.payment === 'paid' && status !== 'paid') toldPaidNotPaid++
    if (u.payment === 'cancelled' && status !== 'cancelled') toldCancelledNot++
    // Never paid (on purpose, or refused 402): the order cannot end paid or cancelled (it expires,
    // or the worker failed it before it was held).
    if (
      (u.payment === 'left' || u.payment === 'insufficient_funds') &&
      (status === 'paid' || status === 'cancelled' || status === 'confirmed')
    )
      unpaidNotExpired++
  }
  const b = ledger.byStatus
  const paid = count(b, 'confirmed') + count(b, 'paid')
  const held = count(b, 'reserved')
  const holding = paid + held
  const failedFunds = count(b, 'failed:INSUFFICIENT_FUNDS')
  const failedDuplicate = count(b, 'failed:duplicate_unit')
  const cancelled = count(b, 'cancelled')
  const expired = count(b, 'expired')
  const failedOther = Object.fromEntries(
    Object.entries(b)
      .filter(
        ([k]) =>
          k.startsWith('failed:') && k !== 'failed:INSUFFICIENT_FUNDS' && k !== 'failed:duplicate_unit',
      )
      .map(([k, n]) => [k.slice('failed:'.length), n]),
  )
  // No failover in these phases: a unit SQL did not have was promised (200) all the same.
  const phantom = count(b, 'failed:sold_out_in_sql')
  const ended = failedFunds + failedDuplicate + cancelled + expired
  const reserved = holding + ended
  const pending = ledger.returnsPending
  const w = ledger.wallets
  const figures: MoneyFigures = {
    payment: ledger.payment,
    ...(ctx.holdSeconds === undefined ? {} : { holdSeconds: ctx.holdSeconds }),
    price: ctx.price,
    stock: ledger.stockTotal,
    reserved,
    sold: ledger.sold,
    paid,
    held,
    failedFunds,
    failedOther: { ...failedOther, ...(failedDuplicate > 0 ? { duplicate_unit: failedDuplicate } : {}) },
    checkoutRefusedFunds: load.users.filter((u) => u.outcome === 'insufficient_funds').length,
    cancelled,
    expired,
    returned: ledger.returned,
    pendingReturns: pending,
    remaining: ctx.remaining,
    users: ctx.users,
    balances: {
      sum: w.balanceCents / 100,
      min: w.minBalanceCents / 100,
      funded: w.fundedCents / 100,
      charged: w.chargedCents / 100,
    },
    payments,
    stockBalanced: ctx.remaining !== null && ledger.stockTotal === ledger.sold + ctx.remaining + pending,
    returnsBalanced: reserved === ledger.sold + ledger.returned + pending,
  }
  const violations: string[] = []
  if (ledger.sold !== holding)
    violations.push(`sales.sold is ${ledger.sold} but ${holding} order(s) hold a unit`)
  if (ctx.remaining === null) violations.push('the stock in Redis could not be read')
  else if (!figures.stockBalanced)
    violations.push(
      `stock ${ledger.stockTotal} ≠ sold ${ledger.sold} + remaining ${ctx.remaining} + pending ${pending}: Redis and SQL disagree`,
    )
  if (!figures.returnsBalanced)
    violations.push(
      `units reserved ${reserved} ≠ sold ${ledger.sold} + returned ${ledger.returned} + pending ${pending}: a unit lost or counted twice`,
    )
  if (ledger.returnsDone !== ledger.returned)
    violations.push(
      `sales.returned is ${ledger.returned} but ${ledger.returnsDone} order(s) returned their unit`,
    )
  if (ledger.returnsMissing > 0)
    violations.push(`${ledger.returnsMissing} order(s) ended without their unit and never returned it`)
  const oversold = Math.max(0, ledger.sold - ledger.stockTotal, paid - ledger.stockTotal, phantom)
  if (oversold > 0)
    violations.push(
      phantom > 0 && phantom === oversold
        ? `oversold ${oversold} unit(s): reserved for buyers, then failed sold_out_in_sql (SQL had no unit left)`
        : `oversold ${oversold} unit(s) of ${ledger.stockTotal}`,
    )
  if (lost > 0) violations.push(`${lost} order(s) answered 200 but not in SQL`)
  if (wrongUser > 0) violations.push(`${wrongUser} order(s) in SQL for another user`)
  if (ledger.usersTwice > 0) violations.push(`${ledger.usersTwice} user(s) hold two units`)
  if (ledger.doubleCharges > 0) violations.push(`${ledger.doubleCharges} order(s) charged twice`)
  if (ledger.paidWithoutPayment > 0)
    violations.push(`${ledger.paidWithoutPayment} paid order(s) without a payment`)
  if (ledger.paymentsForUnpaid > 0)
    violations.push(`${ledger.paymentsForUnpaid} payment(s) for orders that did not end paid`)
  if (w.minBalanceCents < 0) violations.push(`a balance below zero: ${money(w.minBalanceCents)}`)
  if (w.unbalanced > 0)
    violations.push(`${w.unbalanced} wallet(s) with balance ≠ funded − charged + refunded`)
  if (w.balanceCents !== ctx.setCents - w.paymentsCents + w.refundedCents)
    violations.push(
      `balances sum to ${money(w.balanceCents)}, but ${money(ctx.setCents)} was put in and ${money(w.paymentsCents)} paid`,
    )
  if (toldPaidNotPaid > 0) violations.push(`${toldPaidNotPaid} user(s) told "paid" whose order is not paid`)
  if (toldCancelledNot > 0)
    violations.push(`${toldCancelledNot} user(s) told "cancelled" whose order is not cancelled`)
  if (unpaidNotExpired > 0)
    violations.push(
      `${unpaidNotExpired} order(s) their buyer never paid nor cancelled ended paid or cancelled`,
    )
  if (ledger.payment === 'hold' && held > 0)
    violations.push(`${held} order(s) still reserved after their pay_by: never expired`)
  const notes: string[] = []
  if (violations.length === 0)
    notes.push(
      `stock ${ledger.stockTotal} = sold ${ledger.sold} + remaining ${ctx.remaining} + pending ${pending}; reserved ${reserved} = sold ${ledger.sold} + returned ${ledger.returned}; no balance below 0`,
    )
  if (failedFunds > 0) notes.push(`${failedFunds} order(s) failed INSUFFICIENT_FUNDS, their units sold again`)
  if (figures.checkoutRefusedFunds > 0)
    notes.push(`${figures.checkoutRefusedFunds} checkout(s) refused 402 INSUFFICIENT_FUNDS (no unit taken)`)
  if (expired + cancelled > 0) notes.push(`${cancelled} cancelled, ${expired} expired: their units came back`)
  for (const [reason, n] of Object.entries(failedOther))
    notes.push(`${n} order(s) failed ${reason} (no unit to give back)`)
  if (failedDuplicate > 0)
    notes.push(`${failedDuplicate} order(s) failed duplicate_unit (a user's unit reserved twice; returned)`)
  if (ledger.payment === 'hold' && count(b, 'confirmed') > 0)
    notes.push(
      `${count(b, 'confirmed')} order(s) of this hold sale were charged at the checkout (confirmed): this strategy does not hold orders`,
    )
  return {
    sold: answered.size,
    persisted: [...answered.keys()].filter((id) => ledger.orders.has(id)).length,
    oversold,
    duplicates: ledger.usersTwice,
    doubleCharges: ledger.doubleCharges + ledger.paymentsForUnpaid,
    lost,
    money: figures,
    violations,
    notes,
  }
}
