import type { Db } from '../db/database.js'
import type { OrderStatus } from '../domain/order-states.js'

/**
 * The readers' statements: an order for the routes, a sale's counts for the admin and the
 * gauges, the money and the wallets' books for `reconcile`. Read only; each reader is given a
 * narrow type (below): OrderReader (routes, payments), SqlSaleCountsSource (sale admin),
 * UnitBooksReader (orders/books.ts), GaugeReader (the worker's gauges) and BooksReader (reconcile).
 */

/** The SQL side of a sale's counts (this round). */
export interface SqlSaleCounts {
  round: number
  stock_total: number
  sold: number
  /** Orders that hold a unit (confirmed, reserved, paid). */
  confirmed: number
  /** Orders ended without a unit whose unit is not back in Redis (see SaleCounts.failed). */
  failed: number
  /** sales.returned. */
  returned: number
  /** Orders whose unit return is pending. */
  returns_pending: number
  /** Orders whose unit return is done. */
  returns_done: number
}

/** Where the SQL side of a sale's counts comes from (sale/sale-admin.ts saleCounts, the gauges). */
export interface SqlSaleCountsSource {
  saleCounts(productId: string): Promise<SqlSaleCounts | undefined>
}

export class OrderReaders {
  constructor(readonly db: Db) {}

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

  /**
   * The round's orders that failed for a reason that is not the buyer's (issue 37): a unit
   * reserved twice for one user, or sold out in SQL though Redis reserved it. Each was answered
   * 200 or 202 and never became a live order. Per reason.
   */
  async failedNotByBuyer(productId: string, round: number): Promise<Record<string, number>> {
    const r = await this.db.query<{ failure_reason: string; n: number }>(
      `SELECT failure_reason, count(*)::int AS n FROM orders
         WHERE product_id = $1 AND round = $2 AND status = 'failed'
           AND failure_reason IN ('duplicate_unit', 'sold_out_in_sql')
         GROUP BY failure_reason ORDER BY failure_reason`,
      [productId, round],
    )
    return Object.fromEntries(r.rows.map((row) => [row.failure_reason, Number(row.n)]))
  }

  /** The round's restocks Redis may not hold yet (sale/restocks.ts): id and units. */
  async pendingRestocks(productId: string, round: number): Promise<{ restock_id: string; units: number }[]> {
    const r = await this.db.query<{ restock_id: string; units: number }>(
      `SELECT restock_id, units FROM restocks WHERE product_id = $1 AND round = $2 AND state = 'pending'`,
      [productId, round],
    )
    return r.rows
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

/** What the routes read of an order. */
export type OrderReader = Pick<OrderReaders, 'order' | 'holdsUnit'>

/** What the unit books (orders/books.ts) read. */
export type UnitBooksReader = Pick<
  OrderReaders,
  'saleCounts' | 'countExisting' | 'pendingReturnIds' | 'pendingRestocks'
>

/** What the worker's gauges (orders/sale-gauges.ts) and its sale list read. */
export type GaugeReader = UnitBooksReader &
  Pick<OrderReaders, 'sales' | 'negativeWallets' | 'failedNotByBuyer'>

/** What `reconcile` reads (with the unit books). */
export type BooksReader = Pick<
  OrderReaders,
  | 'sales'
  | 'saleCounts'
  | 'money'
  | 'walletBooks'
  | 'walletTotals'
  | 'pendingReturnIds'
  | 'pendingRestocks'
  | 'failedNotByBuyer'
  | 'countExisting'
>
