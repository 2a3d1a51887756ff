import { Script } from 'kunci'
import { type Db, inTransaction } from '../db/database.js'
import { mayStillAppear, productOfOrder } from '../domain/ids.js'
import { type OrderStatus, REFUNDABLE_STATUSES } from '../domain/order-states.js'
import { saleKeys } from '../redis/keys.js'
import type { SaleStore } from '../sale/sale-store.js'
import {
  type EndedOrder,
  endedAt,
  endOrders,
  lockOrder,
  markPaid,
  type OrderRow,
} from '../sql/held-orders.js'
import { type ChargeResult, chargeOnce, refundOnce } from '../sql/wallets.js'
import type { UnitReturns } from './unit-returns.js'

/**
 * Pay and cancel of a held order (a sale with `payment: 'hold'`, issue 16), the refund of a paid
 * order (the admin's), over the statements of sql/held-orders.ts (endOrders is the one that ends
 * held orders: cancel, expiry by the sweeper or by a late pay): every change of an order here
 * happens with its row locked (FOR UPDATE), so a
 * pay, a cancel, a refund and the sweeper racing for one order settle it once, and the repeats
 * answer what the first one did.
 *
 * The deadline is PostgreSQL's clock: `now() < pay_by` decides payable or expired, for the pay
 * route and for the sweeper alike, so the two can never disagree about an order (pay_by itself is
 * the Redis server time of the reservation + hold_seconds, written by the worker).
 */

/** The order as pay and cancel answer it (`GET /v1/orders/:id` shows the same fields). */
export interface HeldOrderView {
  order_id: string
  status: OrderStatus
  user_id: string
  product_id: string
  amount: number
  /** paid (and confirmed, an instant sale's paid order): when it was charged. */
  paid_at?: string
  cancelled_at?: string
  expired_at?: string
  refunded_at?: string
}

export type OrderActionCode =
  | 'UNKNOWN_ORDER'
  | 'ORDER_PENDING'
  | 'NOT_YOUR_ORDER'
  | 'ORDER_NOT_PAYABLE'
  | 'INSUFFICIENT_FUNDS'
  | 'ORDER_NOT_REFUNDABLE'

export type OrderActionResult =
  | { ok: true; order: HeldOrderView; charge?: ChargeResult }
  | { ok: false; code: OrderActionCode; message: string; status?: string }

export type { EndedOrder } from '../sql/held-orders.js'

/** set-status.lua (also the AMQP consumer's): the order's status in Redis, if Redis still has it. */
const SET_STATUS = Script.fromFile(new URL('./scripts/set-status.lua', import.meta.url))

export interface OrderPaymentsOptions {
  db: Db
  store: SaleStore
  returns: UnitReturns
  /** The balance of a user without a wallet (DEFAULT_WALLET_BALANCE), in cents. */
  defaultWalletBalanceCents: number
  /** Told each charge attempt's result (flash_sale_payments_total). */
  onCharge?: (result: ChargeResult) => void
  /** Told of orders expired here (a pay or cancel that came after pay_by). */
  onExpired?: (productId: string, units: number) => void
  onError?: (err: unknown) => void
}

export class OrderPayments {
  constructor(readonly options: OrderPaymentsOptions) {}

  /**
   * Charges a reserved order once and marks it paid. Repeats and concurrent calls (any instance)
   * wait for the row lock and answer the same body. Past pay_by the order is expired here (and
   * its unit given back) if the sweeper has not done it yet: the answer is the same either way.
   */
  async pay(orderId: string, userId: string): Promise<OrderActionResult> {
    const { defaultWalletBalanceCents: dflt, onCharge } = this.options
    const ended: EndedOrder[] = []
    const result = await inTransaction(this.options.db, async (c): Promise<OrderActionResult> => {
      const row = await lockOrder(c, orderId)
      if (!row) return this.#absent(orderId, userId)
      if (row.user_id !== userId) return notYours(orderId)
      if (row.status === 'paid' || row.status === 'confirmed') return { ok: true, order: view(row) }
      if (row.status === 'reserved' && row.past_due) {
        ended.push(...(await endOrders(c, [orderId], 'expired')))
        return notPayable(orderId, 'expired')
      }
      if (row.status !== 'reserved') return notPayable(orderId, row.status)
      const charge = await chargeOnce(c, { orderId, userId, amountCents: Number(row.price_cents) }, dflt)
      onCharge?.(charge)
      if (charge === 'insufficient_funds') {
        return {
          ok: false,
          code: 'INSUFFICIENT_FUNDS',
          message: `the wallet of user ${userId} does not cover ${cents(row.price_cents)}: top it up and pay again before pay_by; the order stays reserved until then`,
        }
      }
      const paidAt = await markPaid(c, orderId)
      return { ok: true, order: view({ ...row, status: 'paid', ended_at: paidAt }), charge }
    })
    await this.#afterCommit(ended)
    if (result.ok && result.charge === 'charged') await this.#markRedis(result.order, 'paid')
    return result
  }

  /** Cancels a reserved order and gives its unit back; a repeat answers the same. */
  async cancel(orderId: string, userId: string): Promise<OrderActionResult> {
    const ended: EndedOrder[] = []
    const result = await inTransaction(this.options.db, async (c): Promise<OrderActionResult> => {
      const row = await lockOrder(c, orderId)
      if (!row) return this.#absent(orderId, userId)
      if (row.user_id !== userId) return notYours(orderId)
      if (row.status === 'cancelled') return { ok: true, order: view(row) }
      const expire = row.status === 'reserved' && row.past_due
      if (row.status !== 'reserved' || expire) {
        if (expire) ended.push(...(await endOrders(c, [orderId], 'expired')))
        return notPayable(orderId, expire ? 'expired' : row.status, 'cancelled')
      }
      ended.push(...(await endOrders(c, [orderId], 'cancelled')))
      return { ok: true, order: view({ ...row, status: 'cancelled', ended_at: await endedAt(c, orderId) }) }
    })
    await this.#afterCommit(ended)
    return result
  }

  /**
   * Refunds a paid order once (POST /admin/orders/:order_id/refund): the charge goes back to the
   * wallet and the unit back to the sale, so another buyer can get it (the buyer too: their unit
   * no longer counts against the per-user limit). A confirmed order of an instant sale and a
   * paid order of a hold sale can be refunded; a reserved one is cancelled instead. Repeats and
   * concurrent calls answer the same body, and refund once.
   */
  async refund(orderId: string): Promise<OrderActionResult> {
    const ended: EndedOrder[] = []
    const result = await inTransaction(this.options.db, async (c): Promise<OrderActionResult> => {
      const row = await lockOrder(c, orderId)
      if (!row) return this.#absent(orderId)
      if (row.status === 'refunded') return { ok: true, order: view(row) }
      if (!REFUNDABLE_STATUSES.has(row.status)) return notRefundable(orderId, row.status)
      if ((await refundOnce(c, orderId)) === 'not_charged')
        return notRefundable(orderId, row.status, 'has no payment to give back')
      ended.push(...(await endOrders(c, [orderId], 'refunded')))
      const at = await endedAt(c, orderId)
      return { ok: true, order: view({ ...row, status: 'refunded', ended_at: at }) }
    })
    await this.#afterCommit(ended)
    return result
  }

  /**
   * Not in SQL: the worker has not written it yet (Redis knows it), or there is no such order.
   * `userId`: the buyer who asks (pay, cancel); none for the admin (refund).
   */
  async #absent(orderId: string, userId?: string): Promise<OrderActionResult> {
    const productId = productOfOrder(orderId)
    // Redis unreachable: whether it holds the order is unknown (the error answers 503).
    const cached =
      productId === undefined ? undefined : await this.options.store.orderStatus(productId, orderId)
    if (cached && userId !== undefined && cached.userId !== userId) return notYours(orderId)
    if (cached)
      return {
        ok: false,
        code: 'ORDER_PENDING',
        message: `order ${orderId} is reserved but not recorded yet: retry in a second`,
      }
    // Young: it may still appear (held back by the worker, or a reset under way): not final yet.
    if (productId !== undefined && mayStillAppear(orderId))
      return {
        ok: false,
        code: 'ORDER_PENDING',
        message: `order ${orderId} is not recorded yet: retry in a second`,
      }
    return { ok: false, code: 'UNKNOWN_ORDER', message: `no order ${orderId}` }
  }

  /** The units of the orders that ended go back to the sale; a failure leaves them pending for the sweeper. */
  async #afterCommit(ended: readonly EndedOrder[]): Promise<void> {
    if (ended.length === 0) return
    const { returns, onExpired, onError } = this.options
    const first = ended[0]!
    const expired = ended.filter((o) => o.reason === 'expired').length
    if (expired > 0) onExpired?.(first.productId, expired)
    await returns.give(first.productId, ended).catch((err) => onError?.(err))
  }

  /** Best effort: GET /v1/orders answers from SQL for a reserved status in Redis anyway. */
  async #markRedis(order: HeldOrderView, status: 'paid'): Promise<void> {
    await SET_STATUS.run(
      this.options.store.client,
      [saleKeys(order.product_id).status],
      [order.order_id, status],
    ).catch((err) => this.options.onError?.(err))
  }
}

const cents = (c: string | number) => (Number(c) / 100).toFixed(2)

function view(row: OrderRow): HeldOrderView {
  const base = {
    order_id: row.order_id,
    status: row.status,
    user_id: row.user_id,
    product_id: row.product_id,
    amount: Number(row.price_cents) / 100,
  }
  const at = row.ended_at?.toISOString()
  if (row.status === 'paid' && at) return { ...base, paid_at: at }
  if (row.status === 'confirmed' && row.charged_at) return { ...base, paid_at: row.charged_at.toISOString() }
  if (row.status === 'cancelled' && at) return { ...base, cancelled_at: at }
  if (row.status === 'expired' && at) return { ...base, expired_at: at }
  // Refunded in one transaction with its refunds row: ended_at is that row's created_at (now()).
  if (row.status === 'refunded' && at) {
    return { ...base, ...(row.charged_at && { paid_at: row.charged_at.toISOString() }), refunded_at: at }
  }
  return base
}

function notRefundable(orderId: string, status: string, reason?: string): OrderActionResult {
  const why =
    reason ??
    (status === 'reserved'
      ? 'is reserved and was never paid: the buyer cancels it (POST /v1/orders/:order_id/cancel), or it expires at pay_by'
      : status === 'failed'
        ? 'failed when it was recorded and was never charged; its unit already went back if it had one'
        : `was ${status} and was never charged; its unit already went back`)
  return {
    ok: false,
    code: 'ORDER_NOT_REFUNDABLE',
    message: `order ${orderId} cannot be refunded: it ${why}`,
    status,
  }
}

const notYours = (orderId: string): OrderActionResult => ({
  ok: false,
  code: 'NOT_YOUR_ORDER',
  message: `order ${orderId} belongs to another user: send the user_id the checkout was made with`,
})

function notPayable(
  orderId: string,
  status: string,
  action: 'paid' | 'cancelled' = 'paid',
): OrderActionResult {
  const why =
    status === 'expired'
      ? 'was not paid by its pay_by and expired; its unit went back to the sale: check out again'
      : status === 'cancelled'
        ? 'was cancelled; its unit went back to the sale: check out again'
        : status === 'failed'
          ? 'failed when it was recorded (see GET /v1/orders/:order_id for failure_reason)'
          : `is ${status}`
  return {
    ok: false,
    code: 'ORDER_NOT_PAYABLE',
    message: `order ${orderId} cannot be ${action}: it ${why}`,
    status,
  }
}
