import type pg from 'pg'
import { boundIdleTransaction } from '../db/database.js'
import type { OrderStatus } from '../domain/order-states.js'
import type { Queryable } from './wallets.js'

/**
 * The statements of held and paid orders after the checkout: pay, cancel and refund
 * (orders/payments.ts), expiry by the sweeper (orders/hold-sweeper.ts), and the order as
 * GET /v1/orders/:order_id shows it. Every change of an order here happens with its row locked
 * (lockOrder, FOR UPDATE) or in one guarded statement (endOrders).
 */

/** An order locked for pay, cancel or refund. */
export interface OrderRow {
  order_id: string
  product_id: string
  user_id: string
  round: number
  status: OrderStatus
  price_cents: string
  ended_at: Date | null
  past_due: boolean
  charged_at: Date | null
}

// past_due: pay_by has passed, or the sale was reset since (a new round: the held unit went with
// the old one), so the order can only expire.
const LOCK_ORDER = `SELECT o.order_id, o.product_id, o.user_id, o.round, o.status, o.price_cents, o.ended_at,
    (o.pay_by IS NOT NULL AND now() >= o.pay_by OR s.round IS DISTINCT FROM o.round) AS past_due,
    p.created_at AS charged_at
  FROM orders o LEFT JOIN payments p ON p.order_id = o.order_id
    LEFT JOIN sales s ON s.product_id = o.product_id
  WHERE o.order_id = $1 FOR UPDATE OF o`

/** What each ending may end: a held order is cancelled or expires, a paid one is refunded. */
const ENDS_FROM = {
  cancelled: ['reserved'],
  expired: ['reserved'],
  refunded: ['confirmed', 'paid'],
} as const satisfies Record<string, readonly OrderStatus[]>

/** How endOrders may end an order. */
export type EndingStatus = keyof typeof ENDS_FROM

/** An order that ended now and gives its unit back (after the commit: UnitReturns.give). */
export interface EndedOrder {
  orderId: string
  productId: string
  userId: string
  round: number
  reason: EndingStatus
}

/**
 * Ends orders as `cancelled` or `expired` (held orders: status 'reserved') or `refunded` (paid
 * orders: 'confirmed' or 'paid'), in the caller's transaction; others are left as they are:
 * ended_at, unit_return 'pending', and the sale's `sold` lowered for those of its current round
 * (an old round's unit went with the reset; return-units.lua then answers "stale" and nothing
 * comes back). Returns the orders that ended now; the caller gives their units back after the
 * commit.
 */
export async function endOrders(
  c: Queryable,
  orderIds: readonly string[],
  status: EndingStatus,
): Promise<EndedOrder[]> {
  if (orderIds.length === 0) return []
  const r = await c.query<{ order_id: string; product_id: string; user_id: string; round: number }>(
    `WITH ended AS (
       UPDATE orders SET status = $2, ended_at = now(), unit_return = 'pending'
       WHERE order_id = ANY($1) AND status = ANY($3)
       RETURNING order_id, product_id, user_id, round
     ), released AS (
       UPDATE sales s SET sold = s.sold - n.c, updated_at = now()
       FROM (SELECT product_id, round, count(*)::int AS c FROM ended GROUP BY product_id, round) n
       WHERE s.product_id = n.product_id AND s.round = n.round
     )
     SELECT order_id, product_id, user_id, round FROM ended ORDER BY order_id`,
    [[...orderIds], status, ENDS_FROM[status]],
  )
  return r.rows.map((row) => ({
    orderId: row.order_id,
    productId: row.product_id,
    userId: row.user_id,
    round: row.round,
    reason: status,
  }))
}

/** An order as GET /v1/orders/:order_id shows it from SQL (pay_by for held orders). */
export async function orderDetails(
  c: Queryable,
  orderId: string,
): Promise<
  | {
      status: string
      user_id: string
      failure_reason: string | null
      pay_by: Date | null
      ended_at: Date | null
    }
  | undefined
> {
  const r = await c.query(
    'SELECT status, user_id, failure_reason, pay_by, ended_at FROM orders WHERE order_id = $1',
    [orderId],
  )
  return r.rows[0]
}

/** Locks the order's row (and bounds how long a stalled transaction may hold it). */
export async function lockOrder(c: pg.PoolClient, orderId: string): Promise<OrderRow | undefined> {
  // A service instance stalled in the middle of a pay holds the order's row (and maybe the
  // sale's): PostgreSQL ends the session after 10 s idle in the transaction, and rolls it back.
  await boundIdleTransaction(c)
  // A statement that waited for the lock sees the locked order as its holder left it, but the rows
  // it joins as they were when it started: what an answer needs after a concurrent change is
  // therefore on the order itself (a refund's time is its ended_at, see view()), not in a join.
  return (await c.query<OrderRow>(LOCK_ORDER, [orderId])).rows[0]
}

/** The ended_at the transaction just wrote (now(): the same for every statement of it). */
export async function endedAt(c: Queryable, orderId: string): Promise<Date> {
  const r = await c.query<{ ended_at: Date }>('SELECT ended_at FROM orders WHERE order_id = $1', [orderId])
  return r.rows[0]!.ended_at
}

/** Marks a reserved order paid (its row locked by lockOrder, its charge taken); the ended_at written. */
export async function markPaid(c: Queryable, orderId: string): Promise<Date> {
  const paid = await c.query<{ ended_at: Date }>(
    `UPDATE orders SET status = 'paid', ended_at = now() WHERE order_id = $1 RETURNING ended_at`,
    [orderId],
  )
  return paid.rows[0]!.ended_at
}
