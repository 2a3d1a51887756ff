import { boundIdleTransaction, type Db } from '../db/database.js'
import type { Queryable } from './wallets.js'

/**
 * The hold sweeper's statements (orders/hold-sweeper.ts): its fence on the sale's row, the held
 * orders due, the sales to sweep, the holds still active. Ending the orders is endOrders
 * (held-orders.ts), the one statement that ends held orders.
 */

/**
 * In the sweep's transaction: bounds how long a stalled sweeper may hold the sale's row, then
 * writes the lock's token on it (`sweep_fence <= fence`). False: a newer holder has written.
 */
export async function fenceSweep(c: Queryable, productId: string, fence: number): Promise<boolean> {
  await boundIdleTransaction(c)
  const fenced = await c.query(
    'UPDATE sales SET sweep_fence = $2 WHERE product_id = $1 AND sweep_fence <= $2',
    [productId, fence],
  )
  return (fenced.rowCount ?? 0) > 0
}

/** The sale's reserved orders due (past pay_by, or of an old round), locked, SKIP LOCKED. */
export async function dueHolds(c: Queryable, productId: string, batchSize: number): Promise<string[]> {
  // Past pay_by, or of a round a reset ended. SKIP LOCKED: an order a pay or cancel holds right
  // now is theirs to settle.
  const due = await c.query<{ order_id: string }>(
    `SELECT o.order_id FROM orders o JOIN sales s USING (product_id)
       WHERE o.product_id = $1 AND o.status = 'reserved' AND (o.pay_by <= now() OR o.round <> s.round)
       ORDER BY o.pay_by LIMIT $2 FOR UPDATE OF o SKIP LOCKED`,
    [productId, batchSize],
  )
  return due.rows.map((r) => r.order_id)
}

/** The sales to sweep: hold sales, and any sale that still has held orders. */
export async function holdSales(db: Db): Promise<{ product_id: string }[]> {
  const sales = await db.query<{ product_id: string }>(
    `SELECT product_id FROM sales s WHERE payment = 'hold'
         OR EXISTS (SELECT 1 FROM orders o WHERE o.product_id = s.product_id AND o.status = 'reserved')
       ORDER BY product_id`,
  )
  return sales.rows
}

/** flash_sale_holds_active: the sale's reserved orders. */
export async function activeHolds(db: Db, productId: string): Promise<number> {
  const active = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM orders WHERE product_id = $1 AND status = 'reserved'`,
    [productId],
  )
  return active.rows[0]?.n ?? 0
}
