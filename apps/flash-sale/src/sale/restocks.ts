import { type Db, inTransaction } from '../db/database.js'
import { saleKeys } from '../redis/keys.js'
import { isDurable, type ReplicaAcks } from '../redis/replica-acks.js'
import { markRestocks, pendingRestocks, type RestockRow, recordRestock } from '../sql/restocks.js'
import type { SaleStore } from './sale-store.js'

export interface RestocksOptions {
  db: Db
  store: SaleStore
  /** With replica acknowledgements, a restock is done only once a replica holds it. */
  acks?: ReplicaAcks
}

/** What became of a restock in Redis. */
export type RestockOutcome =
  | { kind: 'applied'; epoch: number; stock: number }
  /** Recorded in SQL; Redis has not shown it durable yet (an outage, no confirmation): a worker finishes it. */
  | { kind: 'pending'; cause: unknown }
  /** Redis holds another round of the sale (a reset half done): the restock went with its round. */
  | { kind: 'stale' }

/**
 * Restocks as an outbox (issue 37 item 4), in the demarcation order: SQL's stock_total, the last
 * guard against overselling, grows first and commits with a restock id; Redis, which sells, grows
 * second, once per id (restock.lua), outside any SQL transaction and within a time bound; the
 * restock is marked done once a replica holds it (or the master is shown alone). Redis never holds
 * units SQL does not; a crash, outage or failover between the steps leaves the restock pending,
 * and resumePending() (every worker, every second) applies it again: rolled forward, never back.
 */
export class Restocks {
  constructor(readonly options: RestocksOptions) {}

  /**
   * Records a restock in SQL, then applies it to Redis. Undefined: no such sale. A restock whose
   * Redis step did not complete is still recorded (kind 'pending'): never repeat it, it is
   * finished by the workers.
   */
  async restock(
    productId: string,
    units: number,
  ): Promise<({ round: number; stockTotal: number } & RestockOutcome) | undefined> {
    const row = await inTransaction(this.options.db, (c) => recordRestock(c, productId, units))
    if (!row) return undefined
    const outcome = await this.#apply(productId, row).catch((cause: unknown) => ({
      kind: 'pending' as const,
      cause,
    }))
    return { round: row.round, stockTotal: row.stock_total, ...outcome }
  }

  /** Applies the restocks a crash, an outage or an unconfirmed round left pending; how many were done. */
  async resumePending(productId: string): Promise<number> {
    let done = 0
    for (const row of await pendingRestocks(this.options.db, productId)) {
      const outcome = await this.#apply(productId, row)
      if (outcome.kind !== 'pending') done++
    }
    return done
  }

  async #apply(productId: string, row: RestockRow): Promise<RestockOutcome> {
    const { db, store, acks } = this.options
    const mark = saleKeys(productId).ackMark
    const servedBy = acks?.nodeOf(mark)
    const redis = await store.restock(productId, row.round, row.units, row.restock_id)
    if (!redis) {
      await markRestocks(db, [row.restock_id], 'stale')
      return { kind: 'stale' }
    }
    // Done only once the copy that survives a failover holds it; otherwise it stays pending and
    // is applied again (on the promoted master, if the failover lost it; once, if not).
    if (acks && (servedBy === undefined || !isDurable(await acks.confirmOutcome(mark, servedBy))))
      return { kind: 'pending', cause: new Error('no replica confirmed the restock yet') }
    await markRestocks(db, [row.restock_id], 'done')
    return { kind: 'applied', epoch: redis.epoch, stock: redis.stock }
  }
}
