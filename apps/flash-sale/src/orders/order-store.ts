import type { Db } from '../db/database.js'
import { type BatchWallet, GuardedBatchWallet, NaiveBatchWallet } from '../sql/batch-wallets.js'
import { CheckoutBooks, type CheckoutTx, type RedlockBooks, type StoredAnswer } from '../sql/checkout.js'
import { OrderBatches, type OrderBatchWriter, type PersistOutcome } from '../sql/order-batches.js'
import { OrderReaders } from '../sql/readers.js'
import type { ChargeResult } from '../sql/wallets.js'
import type { OrderEvent } from './order-event.js'

/**
 * The order books as one object over the pool: the statements themselves live in ../sql/, one
 * module per audience (see sql/readers.ts, sql/checkout.ts, sql/order-batches.ts). OrderStore
 * composes them for the code that builds the services (runtime.ts, worker-process.ts,
 * cli/reconcile.ts); each consumer is typed with its audience's narrow type, not this class.
 *
 * It is also where a worker's batch gets its wallet: the guarded one, or the naive one for the
 * `naive` strategy's orders (batchWalletFor), so the shared batch writer has no strategy branch.
 */

export type { NewOrderUnit, SaleRow, StoredAnswer } from '../sql/checkout.js'
export { CheckoutTx } from '../sql/checkout.js'
export type { PersistOutcome } from '../sql/order-batches.js'

export interface OrderStoreOptions {
  /** The balance of a user without a wallet, in cents (DEFAULT_WALLET_BALANCE). @defaultValue 0 */
  defaultWalletCents?: number
  /** Told each charge's result (flash_sale_payments_total), `units` at a time. */
  onCharge?: (result: ChargeResult, units: number) => void
}

export class OrderStore extends OrderReaders implements OrderBatchWriter, RedlockBooks {
  readonly defaultWalletCents: number
  readonly #checkout: CheckoutBooks
  readonly #guarded: OrderBatches
  readonly #naive: OrderBatches

  constructor(
    db: Db,
    readonly options: OrderStoreOptions = {},
  ) {
    super(db)
    this.defaultWalletCents = options.defaultWalletCents ?? 0
    this.#checkout = new CheckoutBooks(db, this.defaultWalletCents, options.onCharge)
    const writer = (wallet: BatchWallet) => new OrderBatches(db, wallet, options.onCharge)
    this.#guarded = writer(new GuardedBatchWallet(this.defaultWalletCents))
    this.#naive = writer(new NaiveBatchWallet(this.defaultWalletCents))
  }

  /**
   * The batch writer for a strategy's orders: the naive wallet (unlocked read, lost update) for
   * strategy 'naive' only, kept like the naive stock to show what the guard prevents; the guarded
   * wallet for every other strategy.
   */
  batchWriterFor(strategy: string): OrderBatchWriter {
    return strategy === 'naive' ? this.#naive : this.#guarded
  }

  /** sql/order-batches.ts persistBatch, with the wallet of the strategy's writer. */
  persistBatch(events: readonly OrderEvent[], strategy: string): Promise<PersistOutcome[]> {
    return this.batchWriterFor(strategy).persistBatch(events, strategy)
  }

  persistReserved(ev: OrderEvent, strategy: string): Promise<PersistOutcome> {
    return this.batchWriterFor(strategy).persistReserved(ev, strategy)
  }

  // The `redlock` strategy's statements (sql/checkout.ts).

  sale(productId: string) {
    return this.#checkout.sale(productId)
  }

  remaining(productId: string) {
    return this.#checkout.remaining(productId)
  }

  checkout<T>(fn: (tx: CheckoutTx) => Promise<T>): Promise<T> {
    return this.#checkout.checkout(fn)
  }

  claimKey(productId: string, key: string, userId: string) {
    return this.#checkout.claimKey(productId, key, userId)
  }

  storeAnswer(productId: string, key: string, answer: StoredAnswer) {
    return this.#checkout.storeAnswer(productId, key, answer)
  }

  releaseKey(productId: string, key: string) {
    return this.#checkout.releaseKey(productId, key)
  }

  keyAnswer(productId: string, key: string) {
    return this.#checkout.keyAnswer(productId, key)
  }
}
