import { type Db, inTransaction, isUniqueViolation } from '../db/database.js'
import type { OrderEvent } from './order-event.js'

export type PersistOutcome =
  | { kind: 'confirmed' }
  /** Already written by an earlier delivery (a worker died before XACK): nothing changed. */
  | { kind: 'duplicate'; status: 'confirmed' | 'failed' }
  | { kind: 'failed'; reason: 'stale_round' | 'sold_out_in_sql' | 'duplicate_unit' }

/**
 * Writes one order exactly once, in one transaction: the order row (its id is the primary key,
 * so a redelivered event changes nothing), the sale's `sold` counter only while it stays within
 * the stock (the second guard against overselling), and one charge of the user's wallet
 * (payments' primary key is the order id). Safe to call any number of times, from any worker.
 */
export async function persistOrder(db: Db, ev: OrderEvent, strategy: string): Promise<PersistOutcome> {
  try {
    return await inTransaction(db, async (c) => {
      const inserted = await c.query(
        `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at)
         VALUES ($1, $2, $3, $4, $5, $6, 'confirmed', $7, to_timestamp($8::double precision / 1000))
         ON CONFLICT (order_id) DO NOTHING RETURNING order_id`,
        [ev.orderId, ev.productId, ev.round, ev.userId, ev.unit, ev.priceCents, strategy, ev.reservedAtMs],
      )
      if (inserted.rowCount === 0) {
        const prior = await c.query<{ status: 'confirmed' | 'failed' }>(
          'SELECT status FROM orders WHERE order_id = $1',
          [ev.orderId],
        )
        return { kind: 'duplicate', status: prior.rows[0]?.status ?? 'failed' } as const
      }
      const sold = await c.query(
        `UPDATE sales SET sold = sold + 1, updated_at = now()
         WHERE product_id = $1 AND round = $2 AND sold < stock_total RETURNING sold`,
        [ev.productId, ev.round],
      )
      if (sold.rowCount === 0) {
        const sale = await c.query<{ round: number }>('SELECT round FROM sales WHERE product_id = $1', [
          ev.productId,
        ])
        const reason = sale.rows[0]?.round === ev.round ? 'sold_out_in_sql' : 'stale_round'
        await c.query(`UPDATE orders SET status = 'failed', failure_reason = $2 WHERE order_id = $1`, [
          ev.orderId,
          reason,
        ])
        return { kind: 'failed', reason } as const
      }
      await chargeWallet(c, ev.orderId, ev.userId, ev.priceCents)
      return { kind: 'confirmed' } as const
    })
  } catch (err) {
    // The user's n-th unit of this round is already confirmed under another order id: Redis lost
    // the buyer record (failover) and sold twice to one user. Record the order as failed.
    if (!isUniqueViolation(err, 'orders_one_unit_per_user')) throw err
    await db.query(
      `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, failure_reason, strategy)
       VALUES ($1, $2, $3, $4, $5, $6, 'failed', 'duplicate_unit', $7) ON CONFLICT (order_id) DO NOTHING`,
      [ev.orderId, ev.productId, ev.round, ev.userId, ev.unit, ev.priceCents, strategy],
    )
    return { kind: 'failed', reason: 'duplicate_unit' }
  }
}

/** One payment per order (primary key) and the wallet's running total, in the caller's transaction. */
export async function chargeWallet(
  c: { query: Db['query'] },
  orderId: string,
  userId: string,
  amountCents: number,
): Promise<void> {
  await c.query('INSERT INTO payments (order_id, user_id, amount_cents) VALUES ($1, $2, $3)', [
    orderId,
    userId,
    amountCents,
  ])
  await c.query(
    `INSERT INTO wallets (user_id, charged_cents, charges) VALUES ($1, $2, 1)
     ON CONFLICT (user_id) DO UPDATE
     SET charged_cents = wallets.charged_cents + EXCLUDED.charged_cents, charges = wallets.charges + 1`,
    [userId, amountCents],
  )
}
