import type pg from 'pg'

/**
 * Every statement on a wallet's money (issue 16), so that the one rule holds everywhere: a charge
 * is taken once per order and never overdraws. The balance check and the debit are one guarded
 * UPDATE (`… WHERE balance_cents >= amount`), in the transaction that records the payment: no
 * read of the balance followed by a write in another round trip, the race the source articles
 * describe (two pods read Rp100,000, both pass, both deduct). The wallets' CHECK (balance >= 0)
 * is the last guard. Invariant (reconcile): balance = funded − charged + refunded.
 *
 * A user without a wallet row has the default balance (DEFAULT_WALLET_BALANCE); the row is
 * created with it (funded = default) the first time the wallet is charged or set.
 */

export type Queryable = Pick<pg.PoolClient, 'query'>

export interface WalletView {
  user_id: string
  /** Currency units (cents / 100), as prices are. */
  balance: number
  charged: number
  charges: number
}

export type ChargeResult = 'charged' | 'already_charged' | 'insufficient_funds'

/**
 * Creates the wallets that do not exist yet with the default balance (funded = default), in
 * user_id order (two transactions lock the rows in the same order). Returns the users whose
 * wallet it created: those rows are this transaction's own until it commits.
 */
export async function ensureWallets(
  c: Queryable,
  userIds: readonly string[],
  defaultCents: number,
): Promise<string[]> {
  if (userIds.length === 0) return []
  const r = await c.query<{ user_id: string }>(
    `INSERT INTO wallets (user_id, balance_cents, funded_cents)
     SELECT u, $2, $2 FROM unnest($1::text[]) AS u ORDER BY u
     ON CONFLICT (user_id) DO NOTHING RETURNING user_id`,
    [[...new Set(userIds)], defaultCents],
  )
  return r.rows.map((row) => row.user_id)
}

/**
 * Charges `amountCents` for `orderId` once: the guarded debit and the payment row in one
 * statement. `already_charged` if the order has a payment (a redelivery, a repeated pay);
 * `insufficient_funds` if the balance does not cover it (nothing written).
 * Call inside the transaction that settles the order, after locking the order (or having just
 * inserted it), so two settlements of one order cannot race.
 */
export async function chargeOnce(
  c: Queryable,
  charge: { orderId: string; userId: string; amountCents: number },
  defaultCents: number,
): Promise<ChargeResult> {
  const paid = await c.query('SELECT 1 FROM payments WHERE order_id = $1', [charge.orderId])
  if ((paid.rowCount ?? 0) > 0) return 'already_charged'
  await ensureWallets(c, [charge.userId], defaultCents)
  const r = await c.query(
    `WITH debit AS (
       UPDATE wallets SET balance_cents = balance_cents - $3, charged_cents = charged_cents + $3,
         charges = charges + 1, updated_at = now()
       WHERE user_id = $2 AND balance_cents >= $3
       RETURNING user_id
     )
     INSERT INTO payments (order_id, user_id, amount_cents) SELECT $1, $2, $3 FROM debit
     RETURNING order_id`,
    [charge.orderId, charge.userId, charge.amountCents],
  )
  return (r.rowCount ?? 0) > 0 ? 'charged' : 'insufficient_funds'
}

export type RefundResult = 'refunded' | 'already_refunded' | 'not_charged'

/**
 * Gives an order's payment back once: the refund row (one per payment, its primary key) and the
 * credit to the wallet (balance and refunded up by the payment's amount) in one statement, so
 * balance = funded − charged + refunded holds after it as before. `already_refunded` if the order
 * has a refund; `not_charged` if it has no payment (nothing written). Call inside the transaction
 * that ends the order, with the order's row locked.
 */
export async function refundOnce(c: Queryable, orderId: string): Promise<RefundResult> {
  const r = await c.query<{ refunded: boolean; charged: boolean }>(
    `WITH pay AS (
       SELECT order_id, user_id, amount_cents FROM payments WHERE order_id = $1
     ), refund AS (
       INSERT INTO refunds (order_id, user_id, amount_cents) SELECT order_id, user_id, amount_cents FROM pay
       ON CONFLICT (order_id) DO NOTHING
       RETURNING user_id, amount_cents
     ), credit AS (
       UPDATE wallets w SET balance_cents = w.balance_cents + refund.amount_cents,
         refunded_cents = w.refunded_cents + refund.amount_cents, updated_at = now()
       FROM refund WHERE w.user_id = refund.user_id
       RETURNING w.user_id
     )
     SELECT EXISTS (SELECT 1 FROM credit) AS refunded, EXISTS (SELECT 1 FROM pay) AS charged`,
    [orderId],
  )
  const row = r.rows[0]!
  return row.refunded ? 'refunded' : row.charged ? 'already_refunded' : 'not_charged'
}

/** Sets a balance (PUT /admin/wallets/:user_id); `funded` moves by the difference, so the books stay whole. */
export async function setBalance(
  c: Queryable,
  userId: string,
  balanceCents: number,
  defaultCents: number,
): Promise<WalletView> {
  await ensureWallets(c, [userId], defaultCents)
  const r = await c.query<WalletRow>(
    `UPDATE wallets SET funded_cents = funded_cents + ($2 - balance_cents), balance_cents = $2, updated_at = now()
     WHERE user_id = $1 RETURNING user_id, balance_cents, charged_cents, charges`,
    [userId, balanceCents],
  )
  return view(r.rows[0]!)
}

/** The wallet as GET /v1/wallets/:user_id shows it (the default balance if it has no row yet). */
export async function walletOf(c: Queryable, userId: string, defaultCents: number): Promise<WalletView> {
  const r = await c.query<WalletRow>(
    'SELECT user_id, balance_cents, charged_cents, charges FROM wallets WHERE user_id = $1',
    [userId],
  )
  return view(
    r.rows[0] ?? { user_id: userId, balance_cents: String(defaultCents), charged_cents: '0', charges: 0 },
  )
}

interface WalletRow {
  user_id: string
  balance_cents: string
  charged_cents: string
  charges: number
}

const view = (r: WalletRow): WalletView => ({
  user_id: r.user_id,
  balance: Number(r.balance_cents) / 100,
  charged: Number(r.charged_cents) / 100,
  charges: Number(r.charges),
})
