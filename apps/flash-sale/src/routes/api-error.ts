import type { FastifyReply } from 'fastify'
import type { RefusalCode } from '../domain/refusals.js'
import { type Refusal, unavailable } from '../domain/refusals.js'
import { ServiceError } from '../errors.js'

/**
 * The HTTP answers besides success. Each has a stable `code` (the JSON body's `error.code`) and
 * its status; only the HTTP layer knows statuses: the strategies return domain refusals
 * (domain/refusals.ts) and the waiting room throws them (DomainRefusalError), fromRefusal() turns them
 * into these, and the one error handler in plugins/errors.ts sends them.
 */
export const HTTP_STATUS = Object.freeze({
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  /** Waiting room: a ticket that is forged, another user's or sale's, stale or lapsed. */
  INVALID_TICKET: 403,
  NOT_FOUND: 404,
  UNKNOWN_PRODUCT: 404,
  UNKNOWN_ORDER: 404,
  NO_WAITING_ROOM: 404,
  /** Pay/cancel of an order of another user. */
  NOT_YOUR_ORDER: 403,
  /** The wallet does not cover the price (redlock checkout; pay of a held order). */
  INSUFFICIENT_FUNDS: 402,
  /** Pay/cancel of an order that is no longer reserved (cancelled, expired, failed). */
  ORDER_NOT_PAYABLE: 409,
  /** Refund of an order that was not paid (reserved, failed, cancelled, expired). */
  ORDER_NOT_REFUNDABLE: 409,
  /** Pay/cancel/refund of an order the worker has not recorded yet: retry in a moment. */
  ORDER_PENDING: 409,
  SOLD_OUT: 409,
  ALREADY_PURCHASED: 409,
  SALE_NOT_STARTED: 409,
  SALE_ENDED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IDEMPOTENCY_KEY_REUSED: 422,
  BUSY: 429,
  /** Waiting room on, no ticket sent: join the queue. */
  WAITING_ROOM: 429,
  /** Waiting room: a valid ticket, not admitted yet. */
  NOT_ADMITTED: 429,
  UNAVAILABLE: 503,
  INTERNAL: 500,
} as const satisfies Record<RefusalCode, number> & Record<string, number>)

export type ApiErrorCode = keyof typeof HTTP_STATUS

export class ApiError extends ServiceError {
  readonly status: number
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
    /** Seconds, sent as Retry-After with 429 and 503. */
    readonly retryAfterS?: number,
    options?: ErrorOptions,
  ) {
    super(message, options)
    this.status = HTTP_STATUS[code]
  }
}

/**
 * Sends an ApiError as its status, Retry-After and `{ error: { code, message, …details } }`. It
 * sits beside ApiError, not in plugins/errors.ts: a route that answers an error itself (the
 * checkout's overload shedding) needs it, and routes/ sits below plugins/.
 */
export function sendError(reply: FastifyReply, err: ApiError): FastifyReply {
  if (err.retryAfterS !== undefined) reply.header('Retry-After', String(err.retryAfterS))
  return reply.code(err.status).send({ error: { code: err.code, message: err.message, ...err.details } })
}

/**
 * A refusal's JSON body, built without an Error (the sold-out flood answers tens of thousands of
 * these a second: no stack trace to capture, no trip through the error handler).
 */
export function refusalBody(r: Refusal): { error: Record<string, unknown> } {
  return {
    error: r.orderId
      ? { code: r.code, message: r.message, ...r.details, order_id: r.orderId }
      : { code: r.code, message: r.message, ...r.details },
  }
}

/**
 * A refusal of the domain as its HTTP answer (ALREADY_PURCHASED carries `order_id`, the waiting
 * room's refusals their `details`).
 */
export function fromRefusal(r: Refusal): ApiError {
  const details = r.orderId ? { ...r.details, order_id: r.orderId } : { ...r.details }
  return new ApiError(r.code, r.message, details, r.retryAfterS, { cause: r.cause })
}

export const invalid = (field: string, rule: string) =>
  new ApiError('INVALID_REQUEST', `${field}: ${rule}`, { field, rule })

/** The HTTP layer's own "retry later" (shedding before any work). */
export const unavailableError = (why: string, retryAfterS?: number, cause?: unknown) =>
  fromRefusal(unavailable(why, retryAfterS, cause))
