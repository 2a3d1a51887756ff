import type pg from 'pg'
import { type Db, inTransaction, isUniqueViolation } from '../db/database.js'
import type { OrderEvent } from './order-event.js'

/**
 * Every SQL statement on orders, payments and wallets, and on the `sold` counter and the
 * idempotency rows that go with them, in one place. The worker persists through it, the
 * `redlock` strategy runs its checkout transaction through it, the routes, the gauges and
 * `reconcile` read through it.
 */

export type PersistOutcome =
  | { kind: 'confirmed' }
  /** Already written by an earlier delivery (a worker died before XACK): nothing changed. */
  | { kind: 'duplicate'; status: 'confirmed' | 'failed' }
  | { kind: 'failed'; reason: 'stale_round' | 'sold_out_in_sql' | 'duplicate_unit' }

/** A sale as a checkout in SQL sees it (the `redlock` strategy). */
export interface SaleRow {
  round: number
  stock_total: number
  sold: number
  per_user_limit: number
  price_cents: string
  not_started: boolean
  ended: boolean
}

/** The SQL side of a sale's counts. */
export interface SqlSaleCounts {
  round: number
  stock_total: number
  sold: number
  confirmed: number
  failed: number
}

/** A stored answer of an Idempotency-Key (redlock strategy): the order, or the refusal as sent. */
export type StoredAnswer =
  | { ok: true; order_id: string }
  | { ok: false; code: string; message: string; details: Record<string, unknown> }

const SALE_SQL = `SELECT s.round, s.stock_total, s.sold, s.per_user_limit, p.price_cents,
  (s.starts_at IS NOT NULL AND now() < s.starts_at) AS not_started,
  (s.ends_at IS NOT NULL AND now() >= s.ends_at) AS ended
  FROM sales s JOIN products p USING (product_id) WHERE s.product_id = $1`

type Queryable = Pick<pg.PoolClient, 'query'>

/** One payment per order (primary key) and the wallet's running total, in the caller's transaction. */
async function charge(c: Queryable, orderId: string, userId: string, amountCents: number): Promise<void> {
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

/** The statements of the `redlock` checkout, inside its one transaction. */
export class CheckoutTx {
  constructor(readonly c: Queryable) {}

  async sale(productId: string): Promise<SaleRow | undefined> {
    return (await this.c.query<SaleRow>(SALE_SQL, [productId])).rows[0]
  }

  /** The user's confirmed orders of this round, newest first. */
  async confirmedOrdersOf(productId: string, round: number, userId: string): Promise<string[]> {
    const r = await this.c.query<{ order_id: string }>(
      `SELECT order_id FROM orders WHERE product_id = $1 AND round = $2 AND user_id = $3 AND status = 'confirmed'
       ORDER BY persisted_at DESC`,
      [productId, round, userId],
    )
    return r.rows.map((row) => row.order_id)
  }

  /** Runs a guarded update (kunci's fencedUpdate); false when a later holder already wrote. */
  async fenced(statement: { text: string; values: readonly unknown[] }): Promise<boolean> {
    return ((await this.c.query(statement.text, [...statement.values])).rowCount ?? 0) > 0
  }

  /** A confirmed order and its one payment. */
  async confirm(o: {
    orderId: string
    productId: string
    round: number
    userId: string
    unitNo: number
    priceCents: number
    strategy: string
  }): Promise<void> {
    await this.c.query(
      `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'confirmed', $7, now())`,
      [o.orderId, o.productId, o.round, o.userId, o.unitNo, o.priceCents, o.strategy],
    )
    await charge(this.c, o.orderId, o.userId, o.priceCents)
  }
}

export class OrderStore {
  constructor(readonly db: Db) {}

  /**
   * Writes one reserved order exactly once, in one transaction: the order row (its id is the
   * primary key, so a redelivered event changes nothing), the sale's `sold` counter only while it
   * stays within the stock (the second guard against overselling), and one charge of the user's
   * wallet (payments' primary key is the order id). Safe to call any number of times, from any
   * worker.
   */
  async persistReserved(ev: OrderEvent, strategy: string): Promise<PersistOutcome> {
    try {
      return await inTransaction(this.db, async (c) => {
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
        await charge(c, ev.orderId, ev.userId, ev.priceCents)
        return { kind: 'confirmed' } as const
      })
    } catch (err) {
      // The user's n-th unit of this round is already confirmed under another order id: Redis lost
      // the buyer record (failover) and sold twice to one user. Record the order as failed.
      if (!isUniqueViolation(err, 'orders_one_unit_per_user')) throw err
      await this.db.query(
        `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, failure_reason, strategy)
         VALUES ($1, $2, $3, $4, $5, $6, 'failed', 'duplicate_unit', $7) ON CONFLICT (order_id) DO NOTHING`,
        [ev.orderId, ev.productId, ev.round, ev.userId, ev.unit, ev.priceCents, strategy],
      )
      return { kind: 'failed', reason: 'duplicate_unit' }
    }
  }

  /** The sale as a checkout sees it, outside any transaction (answers that cannot change back). */
  async sale(productId: string): Promise<SaleRow | undefined> {
    return new CheckoutTx(this.db).sale(productId)
  }

  /** Runs the `redlock` checkout's statements in one transaction. */
  checkout<T>(fn: (tx: CheckoutTx) => Promise<T>): Promise<T> {
    return inTransaction(this.db, (c) => fn(new CheckoutTx(c)))
  }

  async remaining(productId: string): Promise<number | undefined> {
    const r = await this.db.query<{ left: number }>(
      'SELECT stock_total - sold AS left FROM sales WHERE product_id = $1',
      [productId],
    )
    return r.rows[0]?.left
  }

  async order(
    orderId: string,
  ): Promise<{ status: string; user_id: string; failure_reason: string | null } | undefined> {
    const r = await this.db.query<{ status: string; user_id: string; failure_reason: string | null }>(
      'SELECT status, user_id, failure_reason FROM orders WHERE order_id = $1',
      [orderId],
    )
    return r.rows[0]
  }

  // Idempotency keys of the `redlock` strategy: the first request claims the key, the others wait
  // for its stored answer.

  /** True if this request claimed the key (no other request had it). */
  async claimKey(productId: string, key: string, userId: string): Promise<boolean> {
    const r = await this.db.query(
      `INSERT INTO idempotency (product_id, idem_key, user_id) VALUES ($1, $2, $3)
       ON CONFLICT DO NOTHING RETURNING idem_key`,
      [productId, key, userId],
    )
    return (r.rowCount ?? 0) > 0
  }

  async storeAnswer(productId: string, key: string, answer: StoredAnswer): Promise<void> {
    await this.db.query('UPDATE idempotency SET body = $3 WHERE product_id = $1 AND idem_key = $2', [
      productId,
      key,
      JSON.stringify(answer),
    ])
  }

  /** Frees the key after a "retry later" answer, so that the retry gets a real attempt. */
  async releaseKey(productId: string, key: string): Promise<void> {
    await this.db.query('DELETE FROM idempotency WHERE product_id = $1 AND idem_key = $2', [productId, key])
  }

  /** The key's owner and stored answer (undefined: nobody holds it; answer undefined: still running). */
  async keyAnswer(
    productId: string,
    key: string,
  ): Promise<{ userId: string; answer: StoredAnswer | undefined } | undefined> {
    const r = await this.db.query<{ user_id: string; body: string | null }>(
      'SELECT user_id, body FROM idempotency WHERE product_id = $1 AND idem_key = $2',
      [productId, key],
    )
    const row = r.rows[0]
    if (row === undefined) return undefined
    return {
      userId: row.user_id,
      answer: row.body === null ? undefined : (JSON.parse(row.body) as StoredAnswer),
    }
  }

  // Reading the books.

  async saleCounts(productId: string): Promise<SqlSaleCounts | undefined> {
    const r = await this.db.query<{
      round: number
      stock_total: number
      sold: number
      confirmed: string
      failed: string
    }>(
      `SELECT s.round, s.stock_total, s.sold,
         (SELECT count(*) FROM orders o WHERE o.product_id = s.product_id AND o.round = s.round AND o.status = 'confirmed') AS confirmed,
         (SELECT count(*) FROM orders o WHERE o.product_id = s.product_id AND o.round = s.round AND o.status = 'failed') AS failed
       FROM sales s WHERE s.product_id = $1`,
      [productId],
    )
    const s = r.rows[0]
    return s && { ...s, confirmed: Number(s.confirmed), failed: Number(s.failed) }
  }

  async sales(): Promise<{ product_id: string; per_user_limit: number; sold: number }[]> {
    return (
      await this.db.query<{ product_id: string; per_user_limit: number; sold: number }>(
        'SELECT product_id, per_user_limit, sold FROM sales ORDER BY product_id',
      )
    ).rows
  }

  /** Payments of a round, users over the limit, and payments of orders that are not confirmed. */
  async money(productId: string, round: number, perUserLimit: number) {
    const r = await this.db.query<{
      payments: string
      paid: string | null
      over_limit: string
      bad_payments: string
    }>(
      `SELECT
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS payments,
         (SELECT sum(pay.amount_cents) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS paid,
         (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2 AND status = 'confirmed'
            GROUP BY user_id HAVING count(*) > $3) u) AS over_limit,
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.status <> 'confirmed') AS bad_payments`,
      [productId, round, perUserLimit],
    )
    const m = r.rows[0]!
    return {
      payments: Number(m.payments),
      paidCents: Number(m.paid ?? 0),
      overLimit: Number(m.over_limit),
      badPayments: Number(m.bad_payments),
    }
  }

  /** Every wallet's charges against every payment. */
  async walletTotals(): Promise<{ chargedCents: number; paidCents: number }> {
    const r = await this.db.query<{ charged: string | null; paid: string | null }>(
      'SELECT (SELECT sum(charged_cents) FROM wallets) AS charged, (SELECT sum(amount_cents) FROM payments) AS paid',
    )
    return { chargedCents: Number(r.rows[0]?.charged ?? 0), paidCents: Number(r.rows[0]?.paid ?? 0) }
  }
}
