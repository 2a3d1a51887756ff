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

  /**
   * persistReserved for a batch of one sale's events, in one transaction and a handful of
   * statements whatever its size (issue 15: one transaction per order capped the worker at ~260
   * orders/s): the orders in one multi-row INSERT … ON CONFLICT DO NOTHING, one guarded `sold`
   * update per round of the batch (the units go to the events in stream order), the failures in
   * one UPDATE, payments and wallet totals in one statement each. Outcomes are those of
   * persistReserved, event by event, in the order given. Any error rolls the whole batch back;
   * the caller then persists it event by event, so one bad event fails alone.
   */
  async persistBatch(events: readonly OrderEvent[], strategy: string): Promise<PersistOutcome[]> {
    if (events.length === 0) return []
    return inTransaction(this.db, async (c) => {
      const ids = events.map((e) => e.orderId)
      const inserted = await c.query<{ order_id: string }>(
        `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at)
         SELECT x.o, x.p, x.r, x.u, x.n, x.c, 'confirmed', $8, to_timestamp(x.t::double precision / 1000)
         FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[], $6::bigint[], $7::bigint[])
           WITH ORDINALITY AS x(o, p, r, u, n, c, t, i)
         ORDER BY x.i
         ON CONFLICT DO NOTHING RETURNING order_id`,
        [
          ids,
          events.map((e) => e.productId),
          events.map((e) => e.round),
          events.map((e) => e.userId),
          events.map((e) => e.unit),
          events.map((e) => e.priceCents),
          events.map((e) => e.reservedAtMs),
          strategy,
        ],
      )
      const fresh = new Set(inserted.rows.map((r) => r.order_id))
      const outcomes = new Map<string, PersistOutcome>()
      // Not inserted: written by an earlier delivery (the order id exists), or refused by the
      // one-unit-per-user index (Redis lost the buyer record and sold the user a unit twice).
      const others = ids.filter((id) => !fresh.has(id))
      if (others.length > 0) {
        const prior = await c.query<{ order_id: string; status: 'confirmed' | 'failed' }>(
          'SELECT order_id, status FROM orders WHERE order_id = ANY($1)',
          [others],
        )
        for (const row of prior.rows) outcomes.set(row.order_id, { kind: 'duplicate', status: row.status })
        const twice = events.filter((e) => !fresh.has(e.orderId) && !outcomes.has(e.orderId))
        if (twice.length > 0) {
          await c.query(
            `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, failure_reason, strategy)
             SELECT x.o, x.p, x.r, x.u, x.n, x.c, 'failed', 'duplicate_unit', $7
             FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[], $6::bigint[]) AS x(o, p, r, u, n, c)
             ON CONFLICT (order_id) DO NOTHING`,
            [
              twice.map((e) => e.orderId),
              twice.map((e) => e.productId),
              twice.map((e) => e.round),
              twice.map((e) => e.userId),
              twice.map((e) => e.unit),
              twice.map((e) => e.priceCents),
              strategy,
            ],
          )
          for (const e of twice) outcomes.set(e.orderId, { kind: 'failed', reason: 'duplicate_unit' })
        }
      }
      // The second guard: per (sale, round), as many units as the stock still allows, given to
      // the new orders in stream order; the rest fail (sold out in SQL, or a reset's old round).
      const confirmed: OrderEvent[] = []
      const failed: { id: string; reason: 'stale_round' | 'sold_out_in_sql' }[] = []
      const byRound = new Map<string, OrderEvent[]>()
      for (const e of events) {
        if (!fresh.has(e.orderId)) continue
        const k = `${e.productId}\u0000${e.round}`
        const list = byRound.get(k) ?? []
        list.push(e)
        byRound.set(k, list)
      }
      for (const list of byRound.values()) {
        const { productId, round } = list[0]!
        const granted = await c.query<{ granted: number }>(
          `WITH s AS (SELECT sold, stock_total FROM sales WHERE product_id = $1 AND round = $2 FOR UPDATE)
           UPDATE sales SET sold = LEAST(s.stock_total, s.sold + $3), updated_at = now() FROM s
           WHERE sales.product_id = $1 AND sales.round = $2
           RETURNING sales.sold - s.sold AS granted`,
          [productId, round, list.length],
        )
        const n = granted.rows[0]?.granted ?? 0
        const reason = granted.rowCount === 0 ? 'stale_round' : 'sold_out_in_sql'
        for (const [i, e] of list.entries()) {
          if (i < n) confirmed.push(e)
          else failed.push({ id: e.orderId, reason })
        }
      }
      if (failed.length > 0) {
        await c.query(
          `UPDATE orders SET status = 'failed', failure_reason = x.reason
           FROM unnest($1::text[], $2::text[]) AS x(o, reason) WHERE orders.order_id = x.o`,
          [failed.map((f) => f.id), failed.map((f) => f.reason)],
        )
        for (const f of failed) outcomes.set(f.id, { kind: 'failed', reason: f.reason })
      }
      if (confirmed.length > 0) {
        await c.query(
          `INSERT INTO payments (order_id, user_id, amount_cents)
           SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`,
          [
            confirmed.map((e) => e.orderId),
            confirmed.map((e) => e.userId),
            confirmed.map((e) => e.priceCents),
          ],
        )
        // Users in a fixed order, so that two workers' batches lock wallet rows in the same order.
        await c.query(
          `INSERT INTO wallets (user_id, charged_cents, charges)
           SELECT x.u, sum(x.a), count(*) FROM unnest($1::text[], $2::bigint[]) AS x(u, a)
           GROUP BY x.u ORDER BY x.u
           ON CONFLICT (user_id) DO UPDATE
           SET charged_cents = wallets.charged_cents + EXCLUDED.charged_cents, charges = wallets.charges + EXCLUDED.charges`,
          [confirmed.map((e) => e.userId), confirmed.map((e) => e.priceCents)],
        )
        for (const e of confirmed) outcomes.set(e.orderId, { kind: 'confirmed' })
      }
      return events.map((e) => {
        const outcome = outcomes.get(e.orderId)
        if (outcome === undefined)
          throw new Error(`persistBatch: no outcome for order ${e.orderId}; this is a bug`)
        return outcome
      })
    })
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
