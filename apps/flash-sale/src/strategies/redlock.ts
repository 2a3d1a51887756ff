import { setTimeout as sleep } from 'node:timers/promises'
import { fencedUpdate, KunciError, type Redlock } from 'kunci'
import { type Db, inTransaction, isSqlOutage } from '../db/database.js'
import { ApiError, busy, unavailable } from '../domain/errors.js'
import { newOrderId } from '../domain/ids.js'
import { chargeWallet } from '../orders/persist.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import { type CheckoutRequest, type CheckoutResult, type CheckoutStrategy, refusal } from './strategy.js'

interface SaleRow {
  round: number
  stock_total: number
  sold: number
  per_user_limit: number
  price_cents: string
  not_started: boolean
  ended: boolean
}

const SALE_SQL = `SELECT s.round, s.stock_total, s.sold, s.per_user_limit, p.price_cents,
  (s.starts_at IS NOT NULL AND now() < s.starts_at) AS not_started,
  (s.ends_at IS NOT NULL AND now() >= s.ends_at) AS ended
  FROM sales s JOIN products p USING (product_id) WHERE s.product_id = $1`

/** A stored answer of an Idempotency-Key. */
type StoredAnswer =
  | { ok: true; order_id: string }
  | { ok: false; code: ApiError['code']; message: string; details: Record<string, unknown> }

/**
 * The source articles' first remedy: one Redlock lock per product over 5 independent Redis
 * nodes; inside it the stock is read and decremented in SQL and the order, payment and wallet
 * charge are written in the same transaction, guarded by the lock's fencing token (a holder that
 * stalled past its TTL cannot write: its UPDATE matches no row). Contention past `lockWaitMs` →
 * 429; no quorum of lock nodes → 503; SQL down → 503.
 */
export class RedlockStrategy implements CheckoutStrategy {
  readonly name = 'redlock' as const
  constructor(
    readonly db: Db,
    readonly locks: Redlock,
    readonly options: {
      lockWaitMs: number
      lockTtlMs?: number
      /**
       * A checkout not answered within this is answered 503 (the work goes on: a retry with the
       * same Idempotency-Key gets its outcome). Covers the wait for an SQL connection, the lock
       * and the transaction. @defaultValue 3000
       */
      deadlineMs?: number
    },
  ) {}

  async checkout(req: CheckoutRequest): Promise<CheckoutResult> {
    try {
      const work =
        req.idempotencyKey === undefined ? this.#checkout(req) : this.#idempotent(req, req.idempotencyKey)
      return await withTimeout(work, this.options.deadlineMs ?? 3_000)
    } catch (err) {
      if (err instanceof TimeoutError)
        throw unavailable('the checkout did not finish in time; retry with the same Idempotency-Key', 1, err)
      throw toApiError(err)
    }
  }

  async remaining(productId: string): Promise<number | undefined> {
    const r = await this.db.query<{ left: number }>(
      'SELECT stock_total - sold AS left FROM sales WHERE product_id = $1',
      [productId],
    )
    return r.rows[0]?.left
  }

  async close(): Promise<void> {}

  /**
   * The first request with a key inserts a claim row; repeats (on any instance) wait for its
   * answer instead of competing for the lock. Final answers (200, 404, 409) are stored; a 429 or
   * 503 removes the claim, so the client's retry gets a real attempt.
   */
  async #idempotent(req: CheckoutRequest, key: string): Promise<CheckoutResult> {
    const claim = await this.db.query(
      `INSERT INTO idempotency (product_id, idem_key, user_id) VALUES ($1, $2, $3)
       ON CONFLICT DO NOTHING RETURNING idem_key`,
      [req.productId, key, req.userId],
    )
    if (claim.rowCount === 0) return this.#replay(req, key)
    try {
      const result = await this.#checkout(req)
      await this.#store(req, key, 200, { ok: true, order_id: result.orderId })
      return result
    } catch (err) {
      const e = toApiError(err)
      if (e.status === 429 || e.status >= 500) {
        await this.db
          .query('DELETE FROM idempotency WHERE product_id = $1 AND idem_key = $2', [req.productId, key])
          .catch(() => {})
      } else {
        await this.#store(req, key, e.status, {
          ok: false,
          code: e.code,
          message: e.message,
          details: e.details,
        })
      }
      throw e
    }
  }

  async #store(req: CheckoutRequest, key: string, status: number, answer: StoredAnswer): Promise<void> {
    await this.db.query(
      'UPDATE idempotency SET status = $3, body = $4 WHERE product_id = $1 AND idem_key = $2',
      [req.productId, key, status, JSON.stringify(answer)],
    )
  }

  async #replay(req: CheckoutRequest, key: string): Promise<CheckoutResult> {
    const deadline = Date.now() + this.options.lockWaitMs + 10_000
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const r = await this.db.query<{ user_id: string; body: string | null }>(
        'SELECT user_id, body FROM idempotency WHERE product_id = $1 AND idem_key = $2',
        [req.productId, key],
      )
      const row = r.rows[0]
      if (row === undefined) return this.#idempotent(req, key) // the first attempt gave up (429/503)
      if (row.user_id !== req.userId) throw refusal('IDEMPOTENCY_KEY_REUSED', req.productId)
      if (row.body !== null) {
        const answer = JSON.parse(row.body) as StoredAnswer
        if (answer.ok) return { orderId: answer.order_id, status: 'confirmed', replayed: true }
        throw new ApiError(answer.code, answer.message, answer.details)
      }
      if (Date.now() > deadline) throw busy('the first request with this Idempotency-Key is still running')
      await sleep(delay)
    }
  }

  async #checkout(req: CheckoutRequest): Promise<CheckoutResult> {
    // Outside the lock, answers that cannot change back: sold out (sold only grows within a
    // round) and unknown product. They keep the lock for the checkouts that can still win.
    const before = (await this.db.query<SaleRow>(SALE_SQL, [req.productId])).rows[0]
    if (before === undefined) throw refusal('UNKNOWN_PRODUCT', req.productId)
    if (before.sold >= before.stock_total) throw refusal('SOLD_OUT', req.productId)
    return this.locks.using(
      `sale:${req.productId}`,
      {
        acquireTimeoutMs: this.options.lockWaitMs,
        ttlMs: this.options.lockTtlMs ?? 5_000,
        maxHoldMs: 10_000,
      },
      (_signal, lock) =>
        inTransaction(this.db, async (c) => {
          const sale = (await c.query<SaleRow>(SALE_SQL, [req.productId])).rows[0]
          if (sale === undefined) throw refusal('UNKNOWN_PRODUCT', req.productId)
          if (sale.not_started) throw refusal('SALE_NOT_STARTED', req.productId)
          if (sale.ended) throw refusal('SALE_ENDED', req.productId)
          const mine = await c.query<{ order_id: string }>(
            `SELECT order_id FROM orders WHERE product_id = $1 AND round = $2 AND user_id = $3 AND status = 'confirmed'
             ORDER BY persisted_at DESC`,
            [req.productId, sale.round, req.userId],
          )
          if ((mine.rowCount ?? 0) >= sale.per_user_limit) {
            throw refusal('ALREADY_PURCHASED', req.productId, mine.rows[0]?.order_id)
          }
          if (sale.sold >= sale.stock_total) throw refusal('SOLD_OUT', req.productId)
          const stmt = fencedUpdate({
            table: 'sales',
            set: { sold: sale.sold + 1 },
            where: { product_id: req.productId, round: sale.round },
            fence: lock.fence,
          })
          const updated = await c.query(stmt.text, [...stmt.values])
          // A later holder has written: this one stalled past its lock. Nothing is written.
          if (updated.rowCount === 0) throw busy('the product lock was lost before the write (fenced out)')
          const orderId = newOrderId(req.productId)
          await c.query(
            `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'confirmed', 'redlock', now())`,
            [orderId, req.productId, sale.round, req.userId, (mine.rowCount ?? 0) + 1, sale.price_cents],
          )
          await chargeWallet(c, orderId, req.userId, Number(sale.price_cents))
          return {
            orderId,
            status: 'confirmed' as const,
            remaining: sale.stock_total - sale.sold - 1,
            replayed: false,
          }
        }),
    )
  }
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err
  if (err instanceof KunciError) {
    switch (err.code) {
      case 'E_LOCK_NOT_ACQUIRED':
      case 'E_LOCK_ABORTED':
        return busy('too many checkouts of this product at once', 1, err)
      case 'E_LOCK_UNAVAILABLE':
        return unavailable('no quorum of lock nodes answered', 2, err)
      case 'E_LOCK_LOST':
      case 'E_LOCK_MAX_HOLD':
        return unavailable('the product lock was lost during the checkout; nothing was written', 1, err)
    }
  }
  if (isSqlOutage(err)) return unavailable('the order database is unreachable', 2, err)
  return err instanceof Error
    ? new ApiError('INTERNAL', err.message, {}, undefined, { cause: err })
    : new ApiError('INTERNAL', String(err))
}
