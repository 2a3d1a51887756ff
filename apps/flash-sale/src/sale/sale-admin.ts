import { type Db, inTransaction } from '../db/database.js'
import type { PaymentMode } from '../domain/order-states.js'
import { ServiceError } from '../errors.js'
import type { SqlSaleCountsSource } from '../sql/readers.js'
import { currentRound, type SaleInput, writeSale } from '../sql/sales.js'
import type { Catalog } from './catalog.js'
import type { Restocks } from './restocks.js'
import type { SaleStore } from './sale-store.js'
import type { StockView } from './stock-view.js'

export type { SaleInput } from '../sql/sales.js'

export interface SaleView {
  product_id: string
  name: string
  price: number
  round: number
  stock_total: number
  per_user_limit: number
  starts_at: string | null
  ends_at: string | null
  payment: PaymentMode
  /** null for instant sales. */
  hold_seconds: number | null
}

/**
 * Creates or resets a sale. A reset first closes the round in Redis (SaleStock.closeRound, shown
 * durable: reservations answer 503 from then on), then SQL (product, and the sale's new round
 * with sold = 0), then the stock pre-loaded in Redis (which opens the round), then the catalog
 * entry dropped from every cache. If anything fails after the close, the admin repeats the call:
 * a new round again. Until then Redis refuses rather than sells, whatever a failover kept: a
 * master that sold the round SQL has closed would answer 200s that all end `stale_round` (issue
 * 37 item 8).
 */
export async function putSale(
  db: Db,
  store: SaleStore,
  catalog: Catalog,
  input: SaleInput,
): Promise<SaleView> {
  const round = await currentRound(db, input.productId)
  if (round !== undefined) await store.closeRound(input.productId, round + 1)
  const row = await inTransaction(db, async (c) => {
    return writeSale(c, input)
  })
  await store.preload({
    productId: input.productId,
    round: row.round,
    stockTotal: input.stock,
    priceCents: input.priceCents,
    startsAtMs: input.startsAt?.getTime() ?? 0,
    endsAtMs: input.endsAt?.getTime() ?? 0,
    perUserLimit: input.perUserLimit,
    payment: input.payment ?? 'instant',
    holdSeconds: input.holdSeconds ?? 0,
  })
  await catalog.invalidate(input.productId)
  return {
    product_id: input.productId,
    name: row.name,
    price: input.priceCents / 100,
    round: row.round,
    stock_total: input.stock,
    per_user_limit: input.perUserLimit,
    starts_at: input.startsAt?.toISOString() ?? null,
    ends_at: input.endsAt?.toISOString() ?? null,
    payment: input.payment ?? 'instant',
    hold_seconds: input.holdSeconds ?? null,
  }
}

/** The answer to POST /admin/sales/:id/restock. */
export interface RestockView {
  product_id: string
  round: number
  stock_total: number
  /** 'applied': on sale now; 'pending': recorded, on sale once Redis confirms it (a worker finishes it: do not repeat the call). */
  restock: 'applied' | 'pending'
  /** Units on sale in Redis; null while pending. */
  remaining: number | null
  /** The sale's epoch after the restock; null while pending. */
  epoch: number | null
}

/**
 * Adds units to a sale's current round (POST /admin/sales/:id/restock) through the restock outbox
 * (sale/restocks.ts): SQL first with a restock id, Redis once per id after the commit, which raises
 * the sale's epoch and tells every instance, so a sold-out answer from memory ends everywhere
 * (sale/sale-snapshots.ts). Undefined: no such sale.
 */
export async function restockSale(
  restocks: Restocks,
  productId: string,
  units: number,
): Promise<RestockView | undefined> {
  const r = await restocks.restock(productId, units)
  if (!r) return undefined
  if (r.kind === 'stale') throw new SaleRoundMismatchError(productId, r.round)
  const applied = r.kind === 'applied'
  return {
    product_id: productId,
    round: r.round,
    stock_total: r.stockTotal,
    restock: applied ? 'applied' : 'pending',
    remaining: applied ? r.stock : null,
    epoch: applied ? r.epoch : null,
  }
}

/** Redis holds another round of the sale than SQL (a reset half done): reset it again. */
export class SaleRoundMismatchError extends ServiceError {
  readonly code = 'E_SALE_ROUND_MISMATCH'
  constructor(productId: string, round: number) {
    super(
      `product ${productId}: SQL is at round ${round} but Redis is not; PUT /admin/sales/${productId} again to reset it`,
    )
  }
}

export interface SaleCounts {
  product_id: string
  round: number
  stock_total: number
  /** Units taken: in Redis for lua/naive (stock_total − Redis stock), SQL `sold` for redlock. */
  reserved: number
  remaining: number
  /** Orders of this round that hold a unit in SQL (confirmed, reserved, paid: SQL's `sold`). */
  persisted: number
  /** Reservations not yet settled in SQL. */
  pending: number
  /**
   * Orders that ended without a unit whose unit is not back in the sale: refused by the worker
   * (stale round, SQL stock guard), dead-lettered, or failed/cancelled/expired with their return
   * still pending. Orders whose unit went back are counted in `returned` instead.
   */
  failed: number
  /** Units given back to the sale this round (sales.returned, issue 16). */
  returned: number
  /** Units SQL gave up that Redis has not taken back yet (resumed by the worker). */
  returns_pending: number
}

export type { SqlSaleCounts, SqlSaleCountsSource } from '../sql/readers.js'

/** The admin's view of a sale: SQL's counts with the strategy's stock (Redis for lua/naive). */
export async function saleCounts(
  orders: SqlSaleCountsSource,
  productId: string,
  stock: StockView,
): Promise<SaleCounts | undefined> {
  const s = await orders.saleCounts(productId)
  if (!s) return undefined
  const remaining = stock.remaining ?? s.stock_total - s.sold
  const reserved = s.stock_total - remaining
  const failed = s.failed + stock.deadLettered
  return {
    product_id: productId,
    round: s.round,
    stock_total: s.stock_total,
    reserved,
    remaining,
    persisted: s.confirmed,
    pending: Math.max(0, reserved - s.confirmed - failed),
    failed,
    returned: s.returned,
    returns_pending: s.returns_pending,
  }
}
