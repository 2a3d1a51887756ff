import { setTimeout as sleep } from 'node:timers/promises'
import { fencedUpdate, KunciError, type Redlock } from 'kunci'
import { isSqlOutage, isUniqueViolation } from '../db/database.js'
import { newOrderId } from '../domain/ids.js'
import {
  busy,
  isReserveCode,
  type Refusal,
  RefusedError,
  saleRefusal,
  unavailable,
} from '../domain/refusals.js'
import type { StockView } from '../sale/stock-view.js'
import type { CheckoutTx, RedlockBooks } from '../sql/checkout.js'
import { reserveHeldOrder } from '../sql/checkout.js'
import type { CheckoutOutcome, CheckoutRequest, CheckoutResult, CheckoutStrategy } from './strategy.js'
import { refused } from './strategy.js'

const refuse = (r: Refusal): never => {
  throw new RefusedError(r)
}

/**
 * The source articles' first remedy: one Redlock lock per product over 5 independent Redis
 * nodes; inside it the stock is read and decremented in SQL and the order, payment and wallet
 * charge are written in the same transaction, guarded by the lock's fencing token (a holder that
 * stalled past its TTL cannot write: its UPDATE matches no row). The charge is the guarded one
 * (sql/wallets.ts): a wallet that does not cover the price → INSUFFICIENT_FUNDS (402) and the
 * transaction rolls back, unit included. The product lock does not protect the wallet (a user
 * buys two products under two locks at once): the guard in SQL does. Contention past
 * `lockWaitMs` → BUSY; no quorum of lock nodes → UNAVAILABLE; SQL down → UNAVAILABLE.
 */
export class RedlockStrategy implements CheckoutStrategy {
  readonly name = 'redlock' as const
  constructor(
    readonly orders: RedlockBooks,
    readonly locks: Redlock,
    readonly options: { lockWaitMs: number; lockTtlMs?: number },
  ) {}

  /**
   * Bounded by its parts, with no deadline of its own (an outer deadline that fired after the
   * transaction committed would answer 503 to a sale): each SQL connection is waited for at most
   * 2 s (db/database.ts), the lock `lockWaitMs`, each statement 5 s.
   */
  async checkout(req: CheckoutRequest): Promise<CheckoutOutcome> {
    try {
      const work =
        req.idempotencyKey === undefined ? this.#checkout(req) : this.#idempotent(req, req.idempotencyKey)
      return { ok: true, ...(await work) }
    } catch (err) {
      return refused(toRefusal(err))
    }
  }

  remaining(productId: string): Promise<number | undefined> {
    return this.orders.remaining(productId)
  }

  /** The stock lives in SQL; no stream, so nothing is dead-lettered. */
  async stockView(): Promise<StockView> {
    return { remaining: undefined, deadLettered: 0 }
  }

  /** A redlock sale never has a room (its stock is in SQL; the room refuses to be set up). */
  roomGen(): string {
    return ''
  }

  async close(): Promise<void> {}

  /**
   * The first request with a key claims it; repeats (on any instance) wait for its answer
   * instead of competing for the lock. Final answers (sold, 404, 409) are stored; BUSY and
   * UNAVAILABLE free the key, so the client's retry gets a real attempt.
   */
  async #idempotent(req: CheckoutRequest, key: string): Promise<CheckoutResult> {
    if (!(await this.orders.claimKey(req.productId, key, req.userId))) return this.#replay(req, key)
    try {
      const result = await this.#checkout(req)
      // The whole answer, so that a repeat of a hold sale's checkout says reserved with its pay_by.
      await this.orders.storeAnswer(req.productId, key, {
        ok: true,
        order_id: result.orderId,
        status: result.status === 'reserved' ? 'reserved' : 'confirmed',
        ...(result.payByMs !== undefined && { pay_by_ms: result.payByMs }),
      })
      return result
    } catch (err) {
      const r = toRefusal(err)
      if (r.code === 'BUSY' || r.code === 'UNAVAILABLE') {
        await this.orders.releaseKey(req.productId, key).catch(() => {})
      } else {
        await this.orders.storeAnswer(req.productId, key, {
          ok: false,
          code: r.code,
          message: r.message,
          details: r.orderId ? { order_id: r.orderId } : {},
        })
      }
      throw new RefusedError(r)
    }
  }

  async #replay(req: CheckoutRequest, key: string): Promise<CheckoutResult> {
    const deadline = Date.now() + this.options.lockWaitMs + 10_000
    for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
      const held = await this.orders.keyAnswer(req.productId, key)
      if (held === undefined) return this.#idempotent(req, key) // the first attempt gave up (BUSY/UNAVAILABLE)
      if (held.userId !== req.userId) refuse(saleRefusal('IDEMPOTENCY_KEY_REUSED', req.productId))
      const answer = held.answer
      if (answer?.ok)
        return {
          orderId: answer.order_id,
          status: answer.status ?? 'confirmed',
          replayed: true,
          ...(answer.pay_by_ms !== undefined && { payByMs: answer.pay_by_ms }),
        }
      // The wallet did not cover the price: the same answer, not a second attempt (a top-up in
      // between does not turn a stored refusal into a sale; a new key does).
      if (answer && !answer.ok && answer.code === 'INSUFFICIENT_FUNDS')
        refuse({ code: 'INSUFFICIENT_FUNDS', message: answer.message })
      if (answer && isReserveCode(answer.code) && answer.code !== 'RESERVED') {
        const orderId = answer.details.order_id
        refuse(saleRefusal(answer.code, req.productId, typeof orderId === 'string' ? orderId : undefined))
      }
      if (Date.now() > deadline) refuse(busy('the first request with this Idempotency-Key is still running'))
      await sleep(delay)
    }
  }

  async #checkout(req: CheckoutRequest): Promise<CheckoutResult> {
    const { productId, userId } = req
    // Outside the lock, answers true when read: sold out (only a cancelled or expired hold can
    // give a unit back, and the next checkout sees it) and unknown product. They keep the lock
    // for the checkouts that can still win.
    const before = await this.orders.sale(productId)
    if (before === undefined) refuse(saleRefusal('UNKNOWN_PRODUCT', productId))
    if (before!.sold >= before!.stock_total) refuse(saleRefusal('SOLD_OUT', productId))
    return this.locks.using(
      `sale:${productId}`,
      {
        acquireTimeoutMs: this.options.lockWaitMs,
        ttlMs: this.options.lockTtlMs ?? 5_000,
        maxHoldMs: 10_000,
      },
      (_signal, lock) => this.orders.checkout((tx) => sellOne(tx, productId, userId, lock.fence)),
    )
  }
}

/**
 * One sale inside the product lock's transaction, written only if the lock's fence is the newest
 * that wrote the sale row AND the row still holds what this holder read. The second condition is
 * not redundant: a holder that stalled past its TTL and a later holder can both have read the
 * row before either wrote; if the stalled one (older fence) commits first, the later one's
 * `sold = <read> + 1` would pass the fence check and overwrite that increment, and two orders
 * would share one unit (seen: 101 confirmed orders for 100 units under load). The fence orders
 * the writers; the compare-and-set on `sold` makes a write computed from a stale read match no
 * row. Exported for the test that replays exactly that interleaving.
 */
export async function sellOne(
  tx: Pick<CheckoutTx, 'c' | 'sale' | 'confirmedOrdersOf' | 'fenced' | 'confirm'>,
  productId: string,
  userId: string,
  fence: number,
): Promise<CheckoutResult> {
  const sale = (await tx.sale(productId)) ?? refuse(saleRefusal('UNKNOWN_PRODUCT', productId))
  if (sale.not_started) refuse(saleRefusal('SALE_NOT_STARTED', productId))
  if (sale.ended) refuse(saleRefusal('SALE_ENDED', productId))
  const mine = await tx.confirmedOrdersOf(productId, sale.round, userId)
  if (mine.length >= sale.per_user_limit) refuse(saleRefusal('ALREADY_PURCHASED', productId, mine[0]))
  if (sale.sold >= sale.stock_total) refuse(saleRefusal('SOLD_OUT', productId))
  const written = await tx.fenced(
    fencedUpdate({
      table: 'sales',
      set: { sold: sale.sold + 1 },
      where: { product_id: productId, round: sale.round, sold: sale.sold },
      fence,
    }),
  )
  // A later holder has written, or another holder changed the row since it was read: this one
  // stalled past its lock (or raced a holder that did). Nothing is written; the client retries.
  if (!written) refuse(busy('the product lock was lost before the write (fenced out)'))
  const orderId = newOrderId(productId)
  const order = {
    orderId,
    productId,
    round: sale.round,
    userId,
    unitNo: mine.length + 1,
    priceCents: Number(sale.price_cents),
  }
  const remaining = sale.stock_total - sale.sold - 1
  // A hold sale: reserved until pay_by, paid later (POST /v1/orders/:id/pay), not charged now.
  const payBy = await reserveHeldOrder(tx.c, order)
  if (payBy) return { orderId, status: 'reserved', remaining, replayed: false, payByMs: payBy.getTime() }
  await tx.confirm({ ...order, strategy: 'redlock' })
  return { orderId, status: 'confirmed', remaining, replayed: false }
}

/** What went wrong, as the domain answers it; anything not foreseen is a bug and is rethrown. */
function toRefusal(err: unknown): Refusal {
  if (err instanceof RefusedError) return err.refusal
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
  // The same user's unit sold twice by two holders that raced (one past its TTL): the unique index
  // refused the second; nothing was written, and the retry answers ALREADY_PURCHASED.
  if (isUniqueViolation(err, 'orders_one_unit_per_user'))
    return busy('another checkout of this user was written first; retry', 1, err)
  throw err
}
