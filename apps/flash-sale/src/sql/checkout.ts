import { type Db, inTransaction } from '../db/database.js'
import { insufficientFunds, RefusedError } from '../domain/refusals.js'
import { type ChargeResult, chargeOnce, type Queryable } from './wallets.js'

/**
 * The `redlock` strategy's statements: its checkout transaction (CheckoutTx) and its
 * Idempotency-Key rows. Its narrow type is RedlockBooks.
 */

/** One unit a checkout in SQL takes for a user (the `redlock` strategy): a new order's row. */
export interface NewOrderUnit {
  orderId: string
  productId: string
  round: number
  userId: string
  unitNo: number
  priceCents: number
}

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

/** A stored answer of an Idempotency-Key (redlock strategy): the order, or the refusal as sent. */
export type StoredAnswer =
  // status and pay_by_ms: a hold sale's reservation (answers stored before them were 'confirmed').
  | { ok: true; order_id: string; status?: 'confirmed' | 'reserved'; pay_by_ms?: number }
  | { ok: false; code: string; message: string; details: Record<string, unknown> }

const SALE_SQL = `SELECT s.round, s.stock_total, s.sold, s.per_user_limit, p.price_cents,
  (s.starts_at IS NOT NULL AND now() < s.starts_at) AS not_started,
  (s.ends_at IS NOT NULL AND now() >= s.ends_at) AS ended
  FROM sales s JOIN products p USING (product_id) WHERE s.product_id = $1`

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

/** The statements the `redlock` strategy runs, and only those. */
export interface RedlockBooks {
  sale(productId: string): Promise<SaleRow | undefined>
  remaining(productId: string): Promise<number | undefined>
  checkout<T>(fn: (tx: CheckoutTx) => Promise<T>): Promise<T>
  claimKey(productId: string, key: string, userId: string): Promise<boolean>
  storeAnswer(productId: string, key: string, answer: StoredAnswer): Promise<void>
  releaseKey(productId: string, key: string): Promise<void>
  keyAnswer(
    productId: string,
    key: string,
  ): Promise<{ userId: string; answer: StoredAnswer | undefined } | undefined>
}

/** The checkout's transaction and the idempotency keys, over the pool. */
export class CheckoutBooks {
  constructor(
    readonly db: Db,
    readonly defaultWalletCents = 0,
    /** Told each charge's result (flash_sale_payments_total), `units` at a time. */
    readonly onCharge?: (result: ChargeResult, units: number) => void,
  ) {}

  /** The sale as a checkout sees it, outside any transaction (answers that cannot change back). */
  async sale(productId: string): Promise<SaleRow | undefined> {
    return new CheckoutTx(this.db).sale(productId)
  }

  /** Runs the `redlock` checkout's statements in one transaction. */
  checkout<T>(fn: (tx: CheckoutTx) => Promise<T>): Promise<T> {
    return inTransaction(this.db, (c) => {
      const tx = new CheckoutTx(c, this.defaultWalletCents)
      tx.onCharge = (result) => this.onCharge?.(result, 1)
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
}

/**
 * The `redlock` checkout of a hold sale, in its transaction (after its fenced `sold` update): the
 * order is written reserved until now() + hold_seconds (PostgreSQL's clock, the one pay and the
 * sweeper compare with), not charged. Undefined, and nothing written, if the sale is instant.
 */
export async function reserveHeldOrder(c: Queryable, o: NewOrderUnit): Promise<Date | undefined> {
  const r = await c.query<{ pay_by: Date }>(
    `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at, pay_by)
     SELECT $1, $2, $3, $4, $5, $6, 'reserved', 'redlock', now(), now() + make_interval(secs => s.hold_seconds)
     FROM sales s WHERE s.product_id = $2 AND s.payment = 'hold'
     RETURNING pay_by`,
    [o.orderId, o.productId, o.round, o.userId, o.unitNo, o.priceCents],
  )
  return r.rows[0]?.pay_by
}
