import type { Db } from '../db/database.js'
import type { ReturnReason } from '../domain/order-states.js'
import { saleKeys } from '../redis/keys.js'
import { isDurable, type ReplicaAcks } from '../redis/replica-acks.js'
import type { SaleStore, UnitReturn } from '../sale/sale-store.js'
import { markReturned, pendingReturns } from '../sql/unit-returns.js'

export interface UnitReturnsOptions {
  db: Db
  store: SaleStore
  /** With replica acknowledgements, a return is done only once a replica holds it. */
  acks?: ReplicaAcks
  /** Told how many units came back, per reason (flash_sale_units_returned_total). */
  onReturned?: (productId: string, reason: ReturnReason, units: number) => void
}

/** An order of one sale whose unit SQL gave up (orders.unit_return = 'pending'). */
export interface PendingReturn extends UnitReturn {
  round: number
}

/**
 * The one path by which a unit goes back to the sale (issue 16), whatever gave it up: the worker
 * (an order that could not be paid, a unit reserved twice for one user), cancel, expiry, refund.
 *
 * The order is first given up in SQL in the transaction that ends it (`unit_return = 'pending'`,
 * and `sold` lowered if it held a unit there). Then Redis takes the unit back (return-units.lua:
 * once per order, however often asked; the epoch grows, every instance sells again), and only
 * then is the order marked `done` in SQL, counted in `sales.returned`. A crash between the steps
 * leaves `pending`, which resumePending() finishes: running the Redis step again is harmless,
 * and a return a failover lost (not on the replica) is run again on the promoted master instead
 * of being lost. So a unit is never returned twice, and never stays out of the sale.
 */
export class UnitReturns {
  constructor(readonly options: UnitReturnsOptions) {}

  /** Returns the units of `orders` (one sale, any rounds) and marks them done; the count returned now. */
  async give(productId: string, orders: readonly PendingReturn[]): Promise<number> {
    const { db, store, acks, onReturned } = this.options
    let returnedNow = 0
    const done: string[] = []
    const counted: string[] = []
    for (const [round, list] of groupBy(orders, (o) => o.round)) {
      const servedBy = acks?.nodeOf(saleKeys(productId).ackMark)
      const reply = await store.returnUnits(productId, round, list)
      // Only once a replica holds the return (when one should): otherwise it stays pending and is
      // run again, which returns it on the promoted master if the failover lost it. A master the
      // Cluster's majority shows alone (promoted, its old master failed) is the only copy there
      // is: the return is done there. A master that merely got no acknowledgement may be cut off
      // from its replica and about to be deposed (issue 20): the return stays pending.
      if (
        acks &&
        (servedBy === undefined ||
          !isDurable(await acks.confirmOutcome(saleKeys(productId).ackMark, servedBy)))
      )
        continue
      for (const [i, o] of list.entries()) {
        const outcome = reply.outcomes[i]
        done.push(o.orderId)
        if (outcome !== 'stale') counted.push(o.orderId)
        if (outcome === 'returned') {
          returnedNow++
          onReturned?.(productId, o.reason, 1)
        }
      }
    }
    if (done.length > 0) {
      // Counted once per order: only rows still pending move, and only those of the current round
      // (a stale round's unit went with the reset) count in sales.returned.
      await markReturned(db, done, counted, productId)
    }
    return returnedNow
  }

  /** Finishes the returns a crash (or an unconfirmed return) left pending; the count returned now. */
  async resumePending(productId: string, limit = 500): Promise<number> {
    const r = await pendingReturns(this.options.db, productId, limit)
    if (r.rows.length === 0) return 0
    return this.give(
      productId,
      r.rows.map((row) => ({
        orderId: row.order_id,
        userId: row.user_id,
        round: row.round,
        reason: row.reason,
      })),
    )
  }
}

function groupBy<T, K>(items: readonly T[], key: (t: T) => K): Map<K, T[]> {
  const m = new Map<K, T[]>()
  for (const item of items) {
    const k = key(item)
    const list = m.get(k)
    if (list) list.push(item)
    else m.set(k, [item])
  }
  return m
}
