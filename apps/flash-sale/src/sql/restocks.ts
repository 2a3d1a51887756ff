import type { Db } from '../db/database.js'
import type { Queryable } from './wallets.js'

/**
 * The restocks' statements (sale/restocks.ts): a restock recorded with the stock it adds, then
 * marked once Redis holds it, and the restocks still pending.
 */

export interface RestockRow {
  restock_id: string
  round: number
  units: number
}

/**
 * Adds `units` to the sale's stock_total and records the restock as pending, in the caller's
 * transaction. Undefined: no such sale.
 */
export async function recordRestock(
  c: Queryable,
  productId: string,
  units: number,
): Promise<(RestockRow & { stock_total: number }) | undefined> {
  const r = await c.query<RestockRow & { stock_total: number }>(
    `WITH s AS (
       UPDATE sales SET stock_total = stock_total + $2, updated_at = now() WHERE product_id = $1
       RETURNING round, stock_total
     )
     INSERT INTO restocks (product_id, round, units)
       SELECT $1, s.round, $2 FROM s
       RETURNING restock_id, round, units, (SELECT stock_total FROM s) AS stock_total`,
    [productId, units],
  )
  return r.rows[0]
}

/** Marks restocks done (Redis holds them) or stale (their round is gone); only pending ones move. */
export async function markRestocks(db: Db, ids: readonly string[], state: 'done' | 'stale'): Promise<void> {
  if (ids.length === 0) return
  await db.query(
    `UPDATE restocks SET state = $2, applied_at = now() WHERE restock_id = ANY($1::bigint[]) AND state = 'pending'`,
    [ids, state],
  )
}

/** The sale's pending restocks, oldest first. */
export async function pendingRestocks(db: Db, productId: string, limit = 100): Promise<RestockRow[]> {
  const r = await db.query<RestockRow>(
    `SELECT restock_id, round, units FROM restocks WHERE product_id = $1 AND state = 'pending'
       ORDER BY restock_id LIMIT $2`,
    [productId, limit],
  )
  return r.rows
}

/** Units of the sale's current round that SQL has and Redis may not have yet. */
export async function pendingRestockUnits(db: Queryable, productId: string): Promise<number> {
  const r = await db.query<{ units: number }>(
    `SELECT coalesce(sum(r.units), 0)::int AS units FROM restocks r JOIN sales s USING (product_id)
       WHERE r.product_id = $1 AND r.state = 'pending' AND r.round = s.round`,
    [productId],
  )
  return r.rows[0]?.units ?? 0
}
