import { type Db, inTransaction } from '../db/database.js'
import {
  type FailureReason,
  type OrderStatus,
  type ReturnReason,
  returnsUnit,
} from '../domain/order-states.js'
import type { BatchEvent, BatchWallet } from './batch-wallets.js'
import type { ChargeResult } from './wallets.js'

/**
 * The worker's statements: a batch of reserved order events persisted in one transaction (the
 * orders, the sales' `sold`, and through its BatchWallet the wallets and payments). Its narrow
 * type is OrderBatchWriter.
 */

export type { BatchEvent } from './batch-wallets.js'

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

/** What the worker's sink persists through, and only that. */
export interface OrderBatchWriter {
  persistBatch(events: readonly BatchEvent[], strategy: string): Promise<PersistOutcome[]>
  persistReserved(ev: BatchEvent, strategy: string): Promise<PersistOutcome>
}

/** Persists the worker's batches, reading and debiting wallets through the BatchWallet given. */
export class OrderBatches implements OrderBatchWriter {
  constructor(
    readonly db: Db,
    readonly wallet: BatchWallet,
    /** Told each charge's result (flash_sale_payments_total), `units` at a time. */
    readonly onCharge?: (result: ChargeResult, units: number) => void,
  ) {}

  /**
   * Writes one reserved order exactly once: persistBatch of one event (the one-by-one fallback
   * of SqlSink, when a batch's transaction failed on a poison event). Same outcomes, same
   * guards, same idempotency.
   */
  async persistReserved(ev: BatchEvent, strategy: string): Promise<PersistOutcome> {
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
   * How the wallets are read and debited is the BatchWallet given (batch-wallets.ts): the
   * guarded one, or the naive one the `naive` strategy's writer gets, kept like the naive stock
   * to show the lost update the guard prevents. This writer does not know which it has.
   */
  async persistBatch(events: readonly BatchEvent[], strategy: string): Promise<PersistOutcome[]> {
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
      const byProduct = new Map<string, BatchEvent[]>()
      for (const e of events) {
        if (!fresh.has(e.orderId)) continue
        const list = byProduct.get(e.productId) ?? []
        list.push(e)
        byProduct.set(e.productId, list)
      }
      const charges: BatchEvent[] = []
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
          const read = await this.wallet.balances(c, unseen)
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
      if (charges.length > 0) await this.wallet.debit(c, charges, balances)
      for (const [id, d] of decisions) {
        outcomes.set(id, d.kind === 'failed' ? { kind: 'failed', reason: d.reason } : { kind: d.kind })
      }
      const refused = ended.filter(([, d]) => d.kind === 'failed' && d.reason === 'INSUFFICIENT_FUNDS')
      if (charges.length > 0) this.onCharge?.('charged', charges.length)
      if (refused.length > 0) this.onCharge?.('insufficient_funds', refused.length)
      return events.map((e) => {
        const outcome = outcomes.get(e.orderId)
        if (outcome === undefined)
          throw new Error(`persistBatch: no outcome for order ${e.orderId}; this is a bug`)
        return outcome
      })
    })
  }
}
