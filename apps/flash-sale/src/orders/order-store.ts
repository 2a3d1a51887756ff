import type pg from 'pg'
import { type Db, inTransaction } from '../db/database.js'
import {
  type FailureReason,
  type OrderStatus,
  type ReturnReason,
  returnsUnit,
} from '../domain/order-states.js'
import { insufficientFunds, RefusedError } from '../domain/refusals.js'
import type { SqlSaleCounts } from '../sale/sale-admin.js'
import type { OrderEvent } from './order-event.js'
import { type ChargeResult, chargeOnce, ensureWallets } from './wallets.js'

/**
 * Every SQL statement on orders, payments and wallets, and on the `sold` counter and the
 * idempotency rows that go with them, in one place. The worker persists through it, the
 * `redlock` strategy runs its checkout transaction through it, the routes, the gauges and
 * `reconcile` read through it.
 */

export type PersistOutcome =
  /** Instant sale: persisted and charged once (paid). */
  | { kind: 'confirmed' }
  /** Hold sale: persisted as reserved until `pay_by`, not charged (POST /v1/orders/:id/pay). */
  | { kind: 'reserved' }
  /**
   * Already written by an earlier delivery (a worker died before XACK): nothing changed.
   * `returnPending`: the order failed and its unit is still to be given back (the earlier
   * delivery died before the return, or Redis was down): the caller gives it again (idempotent).
   */
  | { kind: 'duplicate'; status: OrderStatus; returnPending?: Extract<FailureReason, ReturnReason> }
  | { kind: 'failed'; reason: FailureReason }

/** A sale as a checkout in SQL sees it (the `redlock` strategy). */
/** One unit a checkout in SQL takes for a user (the `redlock` strategy): a new order's row. */
export interface NewOrderUnit {
  orderId: string
  productId: string
  round: number
  userId: string
  unitNo: number
  priceCents: number
}

export interface SaleRow {
  round: number
  stock_total: number
  sold: number
  per_user_limit: number
  price_cents: string
  not_started: boolean
  ended: boolean
}

/** A stored answer of an Idempotency-Key (redlock strategy): the order, or the refusal as sent. */
export type StoredAnswer =
  // status and pay_by_ms: a hold sale's reservation (answers stored before them were 'confirmed').
  | { ok: true; order_id: string; status?: 'confirmed' | 'reserved'; pay_by_ms?: number }
  | { ok: false; code: string; message: string; details: Record<string, unknown> }

const SALE_SQL = `SELECT s.round, s.stock_total, s.sold, s.per_user_limit, p.price_cents,
  (s.starts_at IS NOT NULL AND now() < s.starts_at) AS not_started,
  (s.ends_at IS NOT NULL AND now() >= s.ends_at) AS ended
  FROM sales s JOIN products p USING (product_id) WHERE s.product_id = $1`

type Queryable = Pick<pg.PoolClient, 'query'>

/** The statements of the `redlock` checkout, inside its one transaction. */
export class CheckoutTx {
  constructor(
    readonly c: Queryable,
    readonly defaultWalletCents = 0,
  ) {}

  async sale(productId: string): Promise<SaleRow | undefined> {
    return (await this.c.query<SaleRow>(SALE_SQL, [productId])).rows[0]
  }

  /** The user's orders of this round that hold a unit (confirmed; held or paid in a hold sale), newest first. */
  async confirmedOrdersOf(productId: string, round: number, userId: string): Promise<string[]> {
    const r = await this.c.query<{ order_id: string }>(
      `SELECT order_id FROM orders WHERE product_id = $1 AND round = $2 AND user_id = $3
         AND status IN ('confirmed', 'reserved', 'paid')
       ORDER BY persisted_at DESC`,
      [productId, round, userId],
    )
    return r.rows.map((row) => row.order_id)
  }

  /** Runs a guarded update (kunci's fencedUpdate); false when a later holder already wrote. */
  async fenced(statement: { text: string; values: readonly unknown[] }): Promise<boolean> {
    return ((await this.c.query(statement.text, [...statement.values])).rowCount ?? 0) > 0
  }

  /**
   * A confirmed order and its one payment, charged with the guard (wallets.ts chargeOnce: the
   * balance check and the debit are one statement, in this transaction). A wallet that does not
   * cover the price throws RefusedError(INSUFFICIENT_FUNDS): the transaction rolls back, so the
   * order, the charge and the `sold` unit taken before it are all undone.
   */
  async confirm(o: NewOrderUnit & { strategy: string }): Promise<void> {
    await this.c.query(
      `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'confirmed', $7, now())`,
      [o.orderId, o.productId, o.round, o.userId, o.unitNo, o.priceCents, o.strategy],
    )
    const charged = await chargeOnce(
      this.c,
      { orderId: o.orderId, userId: o.userId, amountCents: o.priceCents },
      this.defaultWalletCents,
    )
    this.onCharge?.(charged)
    if (charged === 'insufficient_funds') throw new RefusedError(insufficientFunds(o.productId, o.priceCents))
  }

  /** Told each charge's result (flash_sale_payments_total). */
  onCharge: ((result: ChargeResult) => void) | undefined
}

export interface OrderStoreOptions {
  /** The balance of a user without a wallet, in cents (DEFAULT_WALLET_BALANCE). @defaultValue 0 */
  defaultWalletCents?: number
  /** Told each charge's result (flash_sale_payments_total), `units` at a time. */
  onCharge?: (result: ChargeResult, units: number) => void
}

/** A fresh order's fate once its sale and wallet were looked at (persistBatch). */
type Decision =
  | { kind: 'confirmed' }
  | { kind: 'reserved'; holdSeconds: number }
  | { kind: 'failed'; reason: FailureReason }

interface SaleLock {
  round: number
  stock_total: number
  sold: number
  payment: 'instant' | 'hold'
  hold_seconds: number | null
}

export class OrderStore {
  readonly defaultWalletCents: number
  constructor(
    readonly db: Db,
    readonly options: OrderStoreOptions = {},
  ) {
    this.defaultWalletCents = options.defaultWalletCents ?? 0
  }

  /**
   * Writes one reserved order exactly once: persistBatch of one event (the one-by-one fallback
   * of SqlSink, when a batch's transaction failed on a poison event). Same outcomes, same
   * guards, same idempotency.
   */
  async persistReserved(ev: OrderEvent, strategy: string): Promise<PersistOutcome> {
    return (await this.persistBatch([ev], strategy))[0]!
  }

  /**
   * Persists a batch of order events exactly once, in one transaction and a handful of
   * statements whatever its size (issue 15: one transaction per order capped the worker at ~260
   * orders/s). Outcomes come event by event, in the order given; any error rolls the whole batch
   * back (the caller then persists it event by event, so one bad event fails alone).
   *
   * - The orders go in with one multi-row INSERT … ON CONFLICT DO NOTHING: a redelivered event
   *   finds its order (`duplicate`); an event refused by the one-unit-per-user index is a unit
   *   Redis reserved twice for one user (a failover lost the buyer record): `duplicate_unit`.
   * - Each sale's row is locked (FOR UPDATE): its round, stock, `sold` and payment mode decide
   *   the new orders in stream order. A unit SQL does not have fails `sold_out_in_sql` (Redis's
   *   count was too high after a failover); another round's event `stale_round`.
   * - Instant sales charge in the same transaction, with the guard (issue 16): the batch's wallet
   *   rows are created (new, with the default balance) or locked FOR UPDATE, in user_id order (two
   *   workers' batches cannot deadlock), each event is decided against the balance left by the
   *   events before it, then one upsert debits and one INSERT records the payments. No balance is read in one transaction and written in
   *   another: the row lock holds from the check to the commit. An order the wallet cannot pay
   *   fails `INSUFFICIENT_FUNDS` and does not take `sold`.
   * - Hold sales (sales.payment = 'hold'): the order is `reserved` until reserved_at +
   *   hold_seconds, takes `sold`, and is not charged (pay/cancel/expiry settle it later).
   * - Orders that failed holding a unit of Redis (INSUFFICIENT_FUNDS, duplicate_unit) are marked
   *   unit_return = 'pending': the caller gives the unit back after the commit (UnitReturns).
   *
   * strategy 'naive' charges with the naive wallet instead (see #naiveBalances): kept, like the
   * naive stock, to show the lost update the guard prevents.
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
      const others = ids.filter((id) => !fresh.has(id))
      if (others.length > 0) {
        const prior = await c.query<{
          order_id: string
          status: OrderStatus
          failure_reason: FailureReason | null
          unit_return: string | null
        }>('SELECT order_id, status, failure_reason, unit_return FROM orders WHERE order_id = ANY($1)', [
          others,
        ])
        for (const row of prior.rows) {
          const reason = row.failure_reason
          const pending =
            row.status === 'failed' && row.unit_return === 'pending' && reason !== null && returnsUnit(reason)
          outcomes.set(
            row.order_id,
            pending
              ? { kind: 'duplicate', status: row.status, returnPending: reason }
              : { kind: 'duplicate', status: row.status },
          )
        }
        const twice = events.filter((e) => !fresh.has(e.orderId) && !outcomes.has(e.orderId))
        if (twice.length > 0) {
          await c.query(
            `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, failure_reason,
               strategy, reserved_at, ended_at, unit_return)
             SELECT x.o, x.p, x.r, x.u, x.n, x.c, 'failed', 'duplicate_unit', $8,
               to_timestamp(x.t::double precision / 1000), now(), 'pending'
             FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::int[], $6::bigint[], $7::bigint[])
               AS x(o, p, r, u, n, c, t)
             ON CONFLICT (order_id) DO NOTHING`,
            [
              twice.map((e) => e.orderId),
              twice.map((e) => e.productId),
              twice.map((e) => e.round),
              twice.map((e) => e.userId),
              twice.map((e) => e.unit),
              twice.map((e) => e.priceCents),
              twice.map((e) => e.reservedAtMs),
              strategy,
            ],
          )
          for (const e of twice) outcomes.set(e.orderId, { kind: 'failed', reason: 'duplicate_unit' })
        }
      }
      const decisions = new Map<string, Decision>()
      const byProduct = new Map<string, OrderEvent[]>()
      for (const e of events) {
        if (!fresh.has(e.orderId)) continue
        const list = byProduct.get(e.productId) ?? []
        list.push(e)
        byProduct.set(e.productId, list)
      }
      const charges: OrderEvent[] = []
      // Balances as the batch leaves them, across its sales (a user in two sales of one batch).
      const balances = new Map<string, number>()
      // Sales in a fixed order too (a batch holds one sale in practice; any number stays safe).
      for (const productId of [...byProduct.keys()].sort()) {
        const list = byProduct.get(productId)!
        const sale = (
          await c.query<SaleLock>(
            'SELECT round, stock_total, sold, payment, hold_seconds FROM sales WHERE product_id = $1 FOR UPDATE',
            [productId],
          )
        ).rows[0]
        const current = sale ? list.filter((e) => e.round === sale.round) : []
        const hold = sale?.payment === 'hold'
        const unseen = hold ? [] : current.filter((e) => !balances.has(e.userId))
        if (unseen.length > 0) {
          const read =
            strategy === 'naive'
              ? await this.#naiveBalances(c, unseen)
              : await this.#lockedBalances(c, unseen)
          for (const [u, b] of read) balances.set(u, b)
        }
        let sold = sale?.sold ?? 0
        // The units SQL still has go to the events in stream order, whether they can pay or not:
        // an order refused for funds gives its unit back to Redis, so a later event cannot have
        // it too (past the stock, Redis sold units that do not exist: sold_out_in_sql).
        let slots = sold
        for (const e of list) {
          let d: Decision
          if (!sale || e.round !== sale.round) d = { kind: 'failed', reason: 'stale_round' }
          else if (slots++ >= sale.stock_total) d = { kind: 'failed', reason: 'sold_out_in_sql' }
          else if (hold) d = { kind: 'reserved', holdSeconds: sale.hold_seconds ?? 0 }
          else {
            const balance = balances.get(e.userId) ?? 0
            if (balance < e.priceCents) d = { kind: 'failed', reason: 'INSUFFICIENT_FUNDS' }
            else {
              balances.set(e.userId, balance - e.priceCents)
              charges.push(e)
              d = { kind: 'confirmed' }
            }
          }
          if (d.kind !== 'failed') sold++
          decisions.set(e.orderId, d)
        }
        if (sale && sold > sale.sold) {
          await c.query('UPDATE sales SET sold = $2, updated_at = now() WHERE product_id = $1', [
            productId,
            sold,
          ])
        }
      }
      const ended = [...decisions.entries()].filter(([, d]) => d.kind !== 'confirmed')
      if (ended.length > 0) {
        await c.query(
          `UPDATE orders SET status = x.s, failure_reason = x.reason, unit_return = x.ret,
             pay_by = CASE WHEN x.s = 'reserved' THEN reserved_at + make_interval(secs => x.hold) END,
             ended_at = CASE WHEN x.s = 'failed' THEN now() END
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[]) AS x(o, s, reason, ret, hold)
           WHERE orders.order_id = x.o`,
          [
            ended.map(([id]) => id),
            ended.map(([, d]) => (d.kind === 'reserved' ? 'reserved' : 'failed')),
            ended.map(([, d]) => (d.kind === 'failed' ? d.reason : null)),
            ended.map(([, d]) => (d.kind === 'failed' && returnsUnit(d.reason) ? 'pending' : null)),
            ended.map(([, d]) => (d.kind === 'reserved' ? d.holdSeconds : 0)),
          ],
        )
      }
      if (charges.length > 0) await this.#debit(c, charges, strategy === 'naive' ? balances : undefined)
      for (const [id, d] of decisions) {
        outcomes.set(id, d.kind === 'failed' ? { kind: 'failed', reason: d.reason } : { kind: d.kind })
      }
      const refused = ended.filter(([, d]) => d.kind === 'failed' && d.reason === 'INSUFFICIENT_FUNDS')
      if (charges.length > 0) this.options.onCharge?.('charged', charges.length)
      if (refused.length > 0) this.options.onCharge?.('insufficient_funds', refused.length)
      return events.map((e) => {
        const outcome = outcomes.get(e.orderId)
        if (outcome === undefined)
          throw new Error(`persistBatch: no outcome for order ${e.orderId}; this is a bug`)
        return outcome
      })
    })
  }

  /**
   * The guarded wallet: the batch's wallets (created with the default balance if new), locked
   * FOR UPDATE in user_id order until the transaction ends. Balances read under the lock cannot
   * change before the debit is written: the check and the debit are one critical section.
   */
  async #lockedBalances(c: Queryable, events: readonly OrderEvent[]): Promise<Map<string, number>> {
    const users = [...new Set(events.map((e) => e.userId))].sort()
    // New wallets are this transaction's own until it commits (another inserting the same user
    // waits on the unique index), so only the existing ones need the explicit lock.
    const created = await ensureWallets(c, users, this.defaultWalletCents)
    const balances = new Map(created.map((u) => [u, this.defaultWalletCents]))
    const existing = users.filter((u) => !balances.has(u))
    if (existing.length > 0) {
      const r = await c.query<{ user_id: string; balance_cents: string }>(
        'SELECT user_id, balance_cents FROM wallets WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE',
        [existing],
      )
      for (const row of r.rows) balances.set(row.user_id, Number(row.balance_cents))
    }
    return balances
  }

  /**
   * The naive wallet (strategy 'naive' only), for contrast, as the naive stock is kept: the
   * balance is read without a lock, and the debit written later as "balance = what I read −
   * price". Two transactions that read the same balance both pass the check, and the second
   * write overwrites the first: two payments, one debit (the source articles' double charge).
   * The wallets' CHECK (balance >= 0) never fires: each write is what one reader thought was left.
   */
  async #naiveBalances(c: Queryable, events: readonly OrderEvent[]): Promise<Map<string, number>> {
    const users = [...new Set(events.map((e) => e.userId))].sort()
    await ensureWallets(c, users, this.defaultWalletCents)
    const r = await c.query<{ user_id: string; balance_cents: string }>(
      'SELECT user_id, balance_cents FROM wallets WHERE user_id = ANY($1)',
      [users],
    )
    return new Map(r.rows.map((row) => [row.user_id, Number(row.balance_cents)]))
  }

  /**
   * One debit per wallet and one payment per order, for the orders decided `confirmed`. Guarded:
   * balance − what this batch charges, on rows locked since the check. Naive (`naiveLeft`): the
   * balance the naive code computed from its unlocked read, written as is.
   */
  async #debit(
    c: Queryable,
    charges: readonly OrderEvent[],
    naiveLeft: ReadonlyMap<string, number> | undefined,
  ): Promise<void> {
    const perUser = new Map<string, { cents: number; n: number }>()
    for (const e of charges) {
      const t = perUser.get(e.userId) ?? { cents: 0, n: 0 }
      t.cents += e.priceCents
      t.n++
      perUser.set(e.userId, t)
    }
    const users = [...perUser.keys()].sort()
    if (naiveLeft) {
      // The row locks in user order only so that two naive batches cannot deadlock: the balance
      // was read before, without them, which is the defect.
      await c.query('SELECT 1 FROM wallets WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE', [users])
    }
    // An upsert that always meets its row (created or locked above): ON CONFLICT goes through the
    // primary key whatever the planner thinks of the table's size (an UPDATE … FROM unnest was
    // planned as a scan of every wallet per batch).
    await c.query(
      `INSERT INTO wallets (user_id, balance_cents, charged_cents, charges)
       SELECT * FROM unnest($1::text[], $4::bigint[], $2::bigint[], $3::int[]) ORDER BY 1
       ON CONFLICT (user_id) DO UPDATE SET
         balance_cents = ${naiveLeft ? 'EXCLUDED.balance_cents' : 'wallets.balance_cents - EXCLUDED.charged_cents'},
         charged_cents = wallets.charged_cents + EXCLUDED.charged_cents,
         charges = wallets.charges + EXCLUDED.charges, updated_at = now()`,
      [
        users,
        users.map((u) => perUser.get(u)!.cents),
        users.map((u) => perUser.get(u)!.n),
        // Naive: the balance it computed from its unlocked read. Guarded: unused (the row exists).
        users.map((u) => naiveLeft?.get(u) ?? 0),
      ],
    )
    await c.query(
      `INSERT INTO payments (order_id, user_id, amount_cents)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`,
      [charges.map((e) => e.orderId), charges.map((e) => e.userId), charges.map((e) => e.priceCents)],
    )
  }

  /** The sale as a checkout sees it, outside any transaction (answers that cannot change back). */
  async sale(productId: string): Promise<SaleRow | undefined> {
    return new CheckoutTx(this.db).sale(productId)
  }

  /** Runs the `redlock` checkout's statements in one transaction. */
  checkout<T>(fn: (tx: CheckoutTx) => Promise<T>): Promise<T> {
    return inTransaction(this.db, (c) => {
      const tx = new CheckoutTx(c, this.defaultWalletCents)
      tx.onCharge = (result) => this.options.onCharge?.(result, 1)
      return fn(tx)
    })
  }

  async remaining(productId: string): Promise<number | undefined> {
    const r = await this.db.query<{ left: number }>(
      'SELECT stock_total - sold AS left FROM sales WHERE product_id = $1',
      [productId],
    )
    return r.rows[0]?.left
  }

  /** An order as GET /v1/orders shows it: `pay_by` for a held order (hold sales), else null. */
  async order(orderId: string): Promise<
    | {
        status: OrderStatus
        user_id: string
        failure_reason: string | null
        pay_by: Date | null
      }
    | undefined
  > {
    const r = await this.db.query<{
      status: OrderStatus
      user_id: string
      failure_reason: string | null
      pay_by: Date | null
    }>('SELECT status, user_id, failure_reason, pay_by FROM orders WHERE order_id = $1', [orderId])
    return r.rows[0]
  }

  /** Does SQL hold this order with a unit (confirmed, paid, or reserved until paid)? */
  async holdsUnit(orderId: string): Promise<boolean> {
    const r = await this.db.query(
      `SELECT 1 FROM orders WHERE order_id = $1 AND status IN ('confirmed', 'paid', 'reserved')`,
      [orderId],
    )
    return (r.rowCount ?? 0) > 0
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
    const r = await this.db.query<Record<keyof SqlSaleCounts, number | string>>(
      `SELECT s.round, s.stock_total, s.sold, s.returned, c.confirmed, c.failed, c.returns_pending, c.returns_done
       FROM sales s, LATERAL (
         SELECT count(*) FILTER (WHERE o.status IN ('confirmed', 'reserved', 'paid')) AS confirmed,
           count(*) FILTER (WHERE o.status IN ('failed', 'cancelled', 'expired', 'refunded')
             AND o.unit_return IS DISTINCT FROM 'done') AS failed,
           count(*) FILTER (WHERE o.unit_return = 'pending') AS returns_pending,
           count(*) FILTER (WHERE o.unit_return = 'done') AS returns_done
         FROM orders o WHERE o.product_id = s.product_id AND o.round = s.round) c
       WHERE s.product_id = $1`,
      [productId],
    )
    const s = r.rows[0]
    if (!s) return undefined
    return {
      round: Number(s.round),
      stock_total: Number(s.stock_total),
      sold: Number(s.sold),
      confirmed: Number(s.confirmed),
      failed: Number(s.failed),
      returned: Number(s.returned),
      returns_pending: Number(s.returns_pending),
      returns_done: Number(s.returns_done),
    }
  }

  async sales(): Promise<{ product_id: string; per_user_limit: number; sold: number }[]> {
    return (
      await this.db.query<{ product_id: string; per_user_limit: number; sold: number }>(
        'SELECT product_id, per_user_limit, sold FROM sales ORDER BY product_id',
      )
    ).rows
  }

  /**
   * Payments of a round, users over the limit, orders that should have one payment and do not,
   * and payments of orders that should have none (global). A refunded order keeps its payment
   * and has one refund of the same amount; a refund of any other order, or of another amount, is
   * counted (global), and so is a refunded order of the round without one.
   */
  async money(productId: string, round: number, perUserLimit: number) {
    const r = await this.db.query<{
      payments: string
      paid: string | null
      payable: string
      unpaid: string
      over_limit: string
      bad_payments: string
      unrefunded: string
      bad_refunds: string
    }>(
      `SELECT
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS payments,
         (SELECT sum(pay.amount_cents) FROM payments pay JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2) AS paid,
         (SELECT count(*) FROM orders WHERE product_id = $1 AND round = $2 AND status IN ('confirmed', 'paid', 'refunded')) AS payable,
         (SELECT count(*) FROM orders o WHERE o.product_id = $1 AND o.round = $2 AND o.status IN ('confirmed', 'paid', 'refunded')
            AND NOT EXISTS (SELECT 1 FROM payments pay WHERE pay.order_id = o.order_id)) AS unpaid,
         (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2
            AND status IN ('confirmed', 'reserved', 'paid') GROUP BY user_id HAVING count(*) > $3) u) AS over_limit,
         (SELECT count(*) FROM payments pay JOIN orders o USING (order_id) WHERE o.status NOT IN ('confirmed', 'paid', 'refunded')) AS bad_payments,
         (SELECT count(*) FROM orders o WHERE o.product_id = $1 AND o.round = $2 AND o.status = 'refunded'
            AND NOT EXISTS (SELECT 1 FROM refunds rf WHERE rf.order_id = o.order_id)) AS unrefunded,
         (SELECT count(*) FROM refunds rf JOIN orders o USING (order_id) JOIN payments pay USING (order_id)
            WHERE o.status <> 'refunded' OR rf.amount_cents <> pay.amount_cents OR rf.user_id <> pay.user_id) AS bad_refunds`,
      [productId, round, perUserLimit],
    )
    const m = r.rows[0]!
    return {
      payments: Number(m.payments),
      paidCents: Number(m.paid ?? 0),
      /** Orders that must have exactly one payment (confirmed, paid). */
      payable: Number(m.payable),
      /** Of those, the ones without a payment. */
      unpaid: Number(m.unpaid),
      overLimit: Number(m.over_limit),
      badPayments: Number(m.bad_payments),
      /** Refunded orders of the round without their refund. */
      unrefunded: Number(m.unrefunded),
      /** Refunds of orders that are not refunded, or not of the payment's amount and payer. */
      badRefunds: Number(m.bad_refunds),
    }
  }

  /**
   * The wallets' books: balance = funded − charged + refunded for every wallet, none below zero
   * (a few of the wallets that drift are named).
   */
  async walletBooks(): Promise<{
    wallets: number
    drifting: string[]
    driftCount: number
    negative: number
  }> {
    const r = await this.db.query<{
      wallets: string
      drift: string
      negative: string
      examples: string[] | null
    }>(
      `SELECT count(*) AS wallets,
         count(*) FILTER (WHERE balance_cents <> funded_cents - charged_cents + refunded_cents) AS drift,
         count(*) FILTER (WHERE balance_cents < 0) AS negative,
         (SELECT array_agg(x) FROM (SELECT user_id || ': balance ' || balance_cents || ' ≠ funded ' || funded_cents
            || ' − charged ' || charged_cents || ' + refunded ' || refunded_cents || ' (cents)' AS x
            FROM wallets WHERE balance_cents <> funded_cents - charged_cents + refunded_cents
            ORDER BY user_id LIMIT 5) e) AS examples
       FROM wallets`,
    )
    const row = r.rows[0]!
    return {
      wallets: Number(row.wallets),
      driftCount: Number(row.drift),
      drifting: row.examples ?? [],
      negative: Number(row.negative),
    }
  }

  /** The orders of a sale's round whose unit return is pending (reconcile: are they in Redis yet?). */
  async pendingReturnIds(productId: string, round: number): Promise<string[]> {
    const r = await this.db.query<{ order_id: string }>(
      `SELECT order_id FROM orders WHERE product_id = $1 AND round = $2 AND unit_return = 'pending'`,
      [productId, round],
    )
    return r.rows.map((row) => row.order_id)
  }

  /** How many of these orders SQL holds, in any status (the books: an unsettled event already persisted). */
  async countExisting(orderIds: readonly string[]): Promise<number> {
    if (orderIds.length === 0) return 0
    const r = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM orders WHERE order_id = ANY($1)',
      [orderIds],
    )
    return r.rows[0]?.n ?? 0
  }

  /** Wallets below zero (flash_sale_wallet_balance_negative; never above 0 while the CHECK holds). */
  async negativeWallets(): Promise<number> {
    const r = await this.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM wallets WHERE balance_cents < 0',
    )
    return r.rows[0]?.n ?? 0
  }

  /** Every wallet's charges against every payment, and its refunds against every refund. */
  async walletTotals(): Promise<{
    chargedCents: number
    paidCents: number
    walletRefundedCents: number
    refundsCents: number
  }> {
    const r = await this.db.query<{
      charged: string | null
      paid: string | null
      w_refunded: string | null
      refunds: string | null
    }>(
      `SELECT (SELECT sum(charged_cents) FROM wallets) AS charged, (SELECT sum(amount_cents) FROM payments) AS paid,
         (SELECT sum(refunded_cents) FROM wallets) AS w_refunded, (SELECT sum(amount_cents) FROM refunds) AS refunds`,
    )
    const row = r.rows[0]
    return {
      chargedCents: Number(row?.charged ?? 0),
      paidCents: Number(row?.paid ?? 0),
      walletRefundedCents: Number(row?.w_refunded ?? 0),
      refundsCents: Number(row?.refunds ?? 0),
    }
  }
}
