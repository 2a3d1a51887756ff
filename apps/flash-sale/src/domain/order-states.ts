/**
 * The life of an order (issue 16), in one place: its states, the reasons it can fail, and which
 * endings give the unit back to the sale. The SQL schema (db/migrations/002_money.sql and
 * 003_refunds.sql), the worker, the pay/cancel/refund routes, the expiry sweeper, reconcile and
 * the docs' state machine follow this.
 *
 *   instant sale:  (reserved in Redis) ──worker──▶ confirmed            (charged once, paid)
 *                                       └─worker──▶ failed               (unit returned, see below)
 *   hold sale:     (reserved in Redis) ──worker──▶ reserved ──pay──────▶ paid
 *                                                           ├─cancel───▶ cancelled (unit returned)
 *                                                           └─pay_by───▶ expired   (unit returned)
 *                                       └─worker──▶ failed
 *   refund (admin): confirmed | paid ──refund──▶ refunded (charge given back, unit returned)
 */
export const ORDER_STATUSES = Object.freeze([
  'confirmed',
  'reserved',
  'paid',
  'failed',
  'cancelled',
  'expired',
  'refunded',
] as const)
export type OrderStatus = (typeof ORDER_STATUSES)[number]

/** States that hold a unit of the sale (SQL's `sold` counts them). */
export const HOLDING_STATUSES: ReadonlySet<OrderStatus> = new Set(['confirmed', 'reserved', 'paid'])

/** Final states: nothing changes an order once it is in one. */
export const FINAL_STATUSES: ReadonlySet<OrderStatus> = new Set([
  'confirmed',
  'paid',
  'failed',
  'cancelled',
  'expired',
  'refunded',
])

/** States that were charged and may be refunded (POST /admin/orders/:order_id/refund). */
export const REFUNDABLE_STATUSES: ReadonlySet<OrderStatus> = new Set(['confirmed', 'paid'])

/**
 * Why a reserved order failed when the worker persisted it (orders.failure_reason).
 * - INSUFFICIENT_FUNDS: the wallet could not pay the price (instant sales).
 * - duplicate_unit: Redis lost a buyer record in a failover and reserved a user's unit twice.
 * - sold_out_in_sql: SQL's `sold` had already reached the stock (Redis lost reservations in a
 *   failover and sold units that were already gone).
 * - stale_round: the sale was reset (a new round) before the order reached SQL.
 */
export const FAILURE_REASONS = Object.freeze([
  'INSUFFICIENT_FUNDS',
  'duplicate_unit',
  'sold_out_in_sql',
  'stale_round',
] as const)
export type FailureReason = (typeof FAILURE_REASONS)[number]

/** Why a unit goes back to the sale (return-units.lua records it per order). */
export type ReturnReason = 'INSUFFICIENT_FUNDS' | 'duplicate_unit' | 'cancelled' | 'expired' | 'refunded'

/** Every ReturnReason, for the metrics' zero series. */
export const RETURN_REASONS: readonly ReturnReason[] = Object.freeze([
  'INSUFFICIENT_FUNDS',
  'duplicate_unit',
  'cancelled',
  'expired',
  'refunded',
])

/**
 * Whether an order that failed for `reason` gives its unit back to the sale in Redis.
 *
 * INSUFFICIENT_FUNDS and duplicate_unit: Redis took a real unit for an order SQL did not keep, so
 * the unit goes back (no unit is lost). sold_out_in_sql: the unit never existed (SQL's stock was
 * already all sold; Redis's count was too high after a failover), so giving it back would sell a
 * unit that is not there. stale_round: the round the unit belonged to is gone (a reset).
 */
export function returnsUnit(reason: FailureReason): reason is Extract<FailureReason, ReturnReason> {
  return reason === 'INSUFFICIENT_FUNDS' || reason === 'duplicate_unit'
}

/** How a sale is paid (PUT /admin/sales/:id `payment`). */
export type PaymentMode = 'instant' | 'hold'
