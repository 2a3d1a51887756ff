import type { Strategy } from '../config.js'
import type { Refusal } from '../domain/refusals.js'

export interface CheckoutRequest {
  productId: string
  userId: string
  idempotencyKey: string | undefined
}

/**
 * What a successful checkout answers. `reserved`: the unit is held in Redis and the order is on
 * its way to SQL (lua, naive); `confirmed`: written in SQL already (redlock); `pending`: reserved,
 * but no replica confirmed it: poll GET /v1/orders/:order_id.
 */
export interface CheckoutResult {
  orderId: string
  status: 'reserved' | 'confirmed' | 'pending'
  /** Units left after this checkout, when the strategy knows it cheaply. */
  remaining?: number
  replayed: boolean
}

/** A checkout's outcome in the domain's terms; the routes translate it to HTTP. */
export type CheckoutOutcome = ({ ok: true } & CheckoutResult) | ({ ok: false } & Refusal)

/** What the admin view of a sale needs from the store the strategy sells from. */
export interface StockView {
  /** Units not yet reserved, where the strategy keeps them apart from SQL (Redis); else undefined. */
  remaining: number | undefined
  /** Order events that kept failing and were set aside (the stream's dead letters). */
  deadLettered: number
}

export interface CheckoutStrategy {
  readonly name: Strategy
  /** Resolves with the order or a refusal; rejects only on a bug. */
  checkout(request: CheckoutRequest): Promise<CheckoutOutcome>
  /** Units left, for GET /v1/products. */
  remaining(productId: string): Promise<number | undefined>
  /** For GET /admin/sales/:id. */
  stockView(productId: string): Promise<StockView>
  close(): Promise<void>
}

export const refused = (r: Refusal): CheckoutOutcome => ({ ok: false, ...r })
