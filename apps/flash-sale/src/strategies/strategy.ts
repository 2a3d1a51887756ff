import type { Strategy } from '../config.js'
import type { Refusal } from '../domain/refusals.js'
import type { StockView } from '../sale/stock-view.js'

export interface CheckoutRequest {
  productId: string
  userId: string
  idempotencyKey: string | undefined
  /**
   * The waiting room this checkout was checked against: the generation of the room whose gate
   * admitted it, '' if the gate found no room; undefined if the gate did not run (the strategy
   * knew of no room).
   */
  roomGen?: string
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
  /** Hold sales: the order must be paid by then (ms since the epoch; POST /v1/orders/:id/pay). */
  payByMs?: number
}

/**
 * A checkout's outcome in the domain's terms; the routes translate it to HTTP. `gate`: the sale
 * has a waiting room this checkout was not checked against (nothing was done): run the room's
 * gate, then the checkout again with its `roomGen`.
 */
export type CheckoutOutcome = ({ ok: true } & CheckoutResult) | ({ ok: false } & Refusal) | { ok: 'gate' }

export interface CheckoutStrategy {
  readonly name: Strategy
  /** Resolves with the order or a refusal; rejects only on a bug. */
  checkout(request: CheckoutRequest): Promise<CheckoutOutcome>
  /**
   * A refusal known without any I/O (a sold-out sale's, from memory), or undefined: checkout()
   * decides. Optional: strategies without local answers leave it out. The refusal lane calls it
   * for every checkout it reads while `answering()` says a sale can be answered from memory.
   */
  answerFromMemory?(request: CheckoutRequest): Refusal | undefined
  /**
   * Could a checkout with this key (undefined: none) be answered from memory now, for some sale?
   * Without it (or false) the lane does not read the body.
   */
  answering?(idempotencyKey: string | undefined): boolean
  /**
   * A sold-out sale's refusal of a checkout whose Idempotency-Key this instance has not seen
   * recorded, recorded under the key first (refuse.lua), exactly the answer checkout() gives
   * (asked by the lane only while `answering(undefined)`, i.e. some sale is sold out in memory):
   * the snapshot's refusal, the key's earlier refusal, IDEMPOTENCY_KEY_REUSED, or UNAVAILABLE when
   * Redis did not answer in time. Undefined when the answer is not such a refusal (the sale is not
   * sold out in memory, the snapshot is stale, the key's earlier answer was a reservation or a
   * purchase still to be shown durable): checkout() answers it, and its own refuse.lua call
   * replays what was recorded.
   */
  recordRefusal?(request: CheckoutRequest): Promise<Refusal | undefined>
  /** Units left, for GET /v1/products. */
  remaining(productId: string): Promise<number | undefined>
  /** For GET /admin/sales/:id. */
  stockView(productId: string): Promise<StockView>
  /**
   * The sale's waiting room as far as the strategy knows: '' none (the gate may be skipped), a
   * generation, or undefined (unknown: run the gate).
   */
  roomGen(productId: string): string | undefined
  close(): Promise<void>
}

export const refused = (r: Refusal): CheckoutOutcome => ({ ok: false, ...r })
