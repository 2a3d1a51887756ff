import { type Db, inTransaction } from '../db/database.js'
import type { ReturnReason } from '../domain/order-states.js'

/**
 * The unit returns' statements (orders/unit-returns.ts): a return recorded done once Redis has
 * the unit back, and the returns a crash left pending.
 */

/**
 * Marks these orders' returns done; counted once per order: only rows still pending move, and
 * only those of the current round (`counted`) count in sales.returned.
 *
 * The sale's row is locked first and its round read under that lock. In one statement, the round
 * came from the statement's snapshot while the increment met the row as a concurrent reset had
 * just left it: a return of the old round was counted in the new round's `returned` (found by the
 * fault generator, seed 5: sales.returned one above the orders done; returned-count.test.ts).
 */
export async function markReturned(
  db: Db,
  done: readonly string[],
  counted: readonly string[],
  productId: string,
): Promise<void> {
  await inTransaction(db, async (c) => {
    const sale = await c.query<{ round: number }>(
      'SELECT round FROM sales WHERE product_id = $1 FOR UPDATE',
      [productId],
    )
    const round = sale.rows[0]?.round ?? -1
    await c.query(
      `WITH d AS (
             UPDATE orders SET unit_return = 'done' WHERE order_id = ANY($1) AND unit_return = 'pending'
             RETURNING order_id, round
           )
           UPDATE sales SET returned = returned + n.c, updated_at = now()
           FROM (SELECT count(*)::int AS c FROM d WHERE d.order_id = ANY($2) AND d.round = $4) n
           WHERE sales.product_id = $3 AND n.c > 0`,
      [done, counted, productId, round],
    )
  })
}

/** Up to `limit` orders of the sale whose unit return is pending, in order_id order. */
export function pendingReturns(db: Db, productId: string, limit: number) {
  return db.query<{
    order_id: string
    user_id: string
    round: number
    reason: ReturnReason
  }>(
    `SELECT order_id, user_id, round,
         CASE WHEN status IN ('cancelled', 'expired', 'refunded') THEN status ELSE failure_reason END AS reason
       FROM orders WHERE product_id = $1 AND unit_return = 'pending' ORDER BY order_id LIMIT $2`,
    [productId, limit],
  )
}
