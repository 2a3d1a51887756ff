import type { Db } from '../db/database.js'
import type { PaymentMode } from '../domain/order-states.js'
import type { Queryable } from './wallets.js'

/**
 * The sale's own rows: the admin creates, resets and restocks a sale (sale/sale-admin.ts), the
 * catalog reads a product (sale/catalog.ts). The counts and the checkout's view of a sale are
 * their readers' (readers.ts, checkout.ts).
 */

export interface SaleInput {
  productId: string
  stock: number
  priceCents: number
  name: string | undefined
  startsAt: Date | undefined
  endsAt: Date | undefined
  perUserLimit: number
  /** How its orders are paid. @defaultValue 'instant' */
  payment?: PaymentMode
  /** hold: seconds a reserved order waits for its payment (pay_by = reserved_at + this). */
  holdSeconds?: number
}

/** Writes the product and the sale's new round (sold = 0), in the caller's transaction. */
export async function writeSale(c: Queryable, input: SaleInput): Promise<{ round: number; name: string }> {
  await c.query(
    `INSERT INTO products (product_id, name, price_cents) VALUES ($1, $2, $3)
       ON CONFLICT (product_id) DO UPDATE SET name = COALESCE($4, products.name), price_cents = EXCLUDED.price_cents, updated_at = now()`,
    [input.productId, input.name ?? `Product ${input.productId}`, input.priceCents, input.name ?? null],
  )
  const r = await c.query<{ round: number; name: string }>(
    `INSERT INTO sales (product_id, round, stock_total, sold, per_user_limit, starts_at, ends_at, payment, hold_seconds)
       VALUES ($1, 1, $2, 0, $3, $4, $5, $6, $7)
       ON CONFLICT (product_id) DO UPDATE SET round = sales.round + 1, stock_total = EXCLUDED.stock_total, sold = 0,
         per_user_limit = EXCLUDED.per_user_limit, starts_at = EXCLUDED.starts_at, ends_at = EXCLUDED.ends_at,
         payment = EXCLUDED.payment, hold_seconds = EXCLUDED.hold_seconds, returned = 0, updated_at = now()
       RETURNING round, (SELECT name FROM products WHERE product_id = $1) AS name`,
    [
      input.productId,
      input.stock,
      input.perUserLimit,
      input.startsAt ?? null,
      input.endsAt ?? null,
      input.payment ?? 'instant',
      input.holdSeconds ?? null,
    ],
  )
  return r.rows[0]!
}

/** The sale's current round in SQL, undefined for a product never on sale. */
export async function currentRound(c: Queryable, productId: string): Promise<number | undefined> {
  const r = await c.query<{ round: number }>('SELECT round FROM sales WHERE product_id = $1', [productId])
  return r.rows[0]?.round
}

/** A product's name and price (the catalog's loader). */
export function productRow(db: Db, productId: string) {
  return db.query<{ name: string; price_cents: string }>(
    'SELECT name, price_cents FROM products WHERE product_id = $1',
    [productId],
  )
}
