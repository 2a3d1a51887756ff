import { ServiceError } from '../errors.js'

/**
 * Every answer a reservation can end with, in one table: the codes reserve.lua returns (a unit
 * test reads them from its header), also answered by the `redlock` and `naive` strategies.
 */
export const RESERVE_CODES = Object.freeze([
  'RESERVED',
  'SOLD_OUT',
  'ALREADY_PURCHASED',
  'SALE_NOT_STARTED',
  'SALE_ENDED',
  'UNKNOWN_PRODUCT',
  'IDEMPOTENCY_KEY_REUSED',
] as const)

export type ReserveCode = (typeof RESERVE_CODES)[number]

const RESERVE_CODE_SET: ReadonlySet<string> = new Set(RESERVE_CODES)

export function isReserveCode(value: unknown): value is ReserveCode {
  return typeof value === 'string' && RESERVE_CODE_SET.has(value)
}

/**
 * The waiting room's own refusals (waiting-room/waiting-room.ts): no ticket sent, not admitted
 * yet, a ticket that is not good here, a sale without a room.
 */
export type RoomRefusalCode = 'WAITING_ROOM' | 'NOT_ADMITTED' | 'INVALID_TICKET' | 'NO_WAITING_ROOM'

/**
 * A final answer of the sale (reserve.lua's other codes), or "not now" (retry later), or the
 * waiting room's, or INVALID_REQUEST for input the domain checks itself (a room's options).
 */
export type RefusalCode =
  | Exclude<ReserveCode, 'RESERVED'>
  | 'BUSY'
  | 'UNAVAILABLE'
  | 'INSUFFICIENT_FUNDS'
  | RoomRefusalCode
  | 'INVALID_REQUEST'

/**
 * Why a checkout did not sell (or the waiting room said no), as the domain says it: the
 * strategies return these, the waiting room throws them in a DomainRefusalError, and only the HTTP
 * layer (routes/api-error.ts) turns them into statuses and bodies.
 */
export interface Refusal {
  readonly code: RefusalCode
  readonly message: string
  /** ALREADY_PURCHASED: the order the user already has. */
  readonly orderId?: string
  /** BUSY and UNAVAILABLE: seconds before a retry makes sense. */
  readonly retryAfterS?: number
  readonly cause?: unknown
  /** Fields the answer carries besides code and message (a ticket's `reason`, the queue's URLs). */
  readonly details?: Readonly<Record<string, unknown>>
}

const SALE_MESSAGES: Record<Exclude<ReserveCode, 'RESERVED'>, (productId: string) => string> = {
  SOLD_OUT: (p) => `product ${p} is sold out`,
  ALREADY_PURCHASED: (p) => `this user already bought product ${p} in this sale (see order_id)`,
  SALE_NOT_STARTED: (p) => `the sale of product ${p} has not started yet`,
  SALE_ENDED: (p) => `the sale of product ${p} has ended`,
  UNKNOWN_PRODUCT: (p) => `product ${p} has no sale`,
  IDEMPOTENCY_KEY_REUSED: () =>
    'this Idempotency-Key was used by another request (another user); use a new key per checkout',
}

/** The sale's own refusal for `code` (a reserve code other than RESERVED). */
export function saleRefusal(
  code: Exclude<ReserveCode, 'RESERVED'>,
  productId: string,
  orderId?: string,
): Refusal {
  return {
    code,
    message: SALE_MESSAGES[code](productId),
    ...(code === 'ALREADY_PURCHASED' && orderId ? { orderId } : {}),
  }
}

/**
 * The user's wallet does not cover the price (issue 16; the `redlock` checkout, which charges in
 * its own transaction): nothing was taken. Top the wallet up and buy again.
 */
export function insufficientFunds(productId: string, priceCents: number): Refusal {
  return {
    code: 'INSUFFICIENT_FUNDS',
    message: `the wallet does not cover the price of product ${productId} (${(priceCents / 100).toFixed(2)}); nothing was charged or reserved: top it up and buy again`,
  }
}

/** Too much at once (a contended lock, too many in flight): retry after `retryAfterS`. */
export function busy(why: string, retryAfterS = 1, cause?: unknown): Refusal {
  return { code: 'BUSY', message: `${why}; retry after ${retryAfterS} s`, retryAfterS, cause }
}

/** A store is unreachable or failing over: retry after `retryAfterS` (with the same Idempotency-Key). */
export function unavailable(why: string, retryAfterS = 2, cause?: unknown): Refusal {
  return { code: 'UNAVAILABLE', message: `${why}; retry after ${retryAfterS} s`, retryAfterS, cause }
}

/** Input the domain checks itself is refused, naming the field as the client wrote it and the rule. */
export function invalidInput(field: string, rule: string): Refusal {
  return { code: 'INVALID_REQUEST', message: `${field}: ${rule}`, details: { field, rule } }
}

/**
 * Carries a refusal out of work that must stop (a transaction to roll back); the strategy
 * catches it at its boundary and returns the refusal.
 */
export class RefusedError extends ServiceError {
  readonly code = 'E_REFUSED'
  constructor(readonly refusal: Refusal) {
    super(refusal.message, { cause: refusal.cause })
  }
}

/**
 * A refusal thrown as the answer itself, by the waiting room, whose callers are the routes (no
 * boundary to return it at, unlike RefusedError). Its `code` is the refusal's, the code the JSON
 * body carries (as ApiError's is), and its `details` the body's other fields; the HTTP layer
 * answers it with fromRefusal(err.refusal), so statuses stay there.
 */
export class DomainRefusalError extends ServiceError {
  readonly code: RefusalCode
  readonly details: Readonly<Record<string, unknown>>
  readonly retryAfterS: number | undefined
  constructor(readonly refusal: Refusal) {
    super(refusal.message, { cause: refusal.cause })
    this.code = refusal.code
    this.details = refusal.details ?? {}
    this.retryAfterS = refusal.retryAfterS
  }
}
