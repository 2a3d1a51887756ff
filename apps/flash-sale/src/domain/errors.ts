/**
 * The answers a checkout can give besides success. Each has a stable `code` (the JSON body's
 * `error.code`) and its HTTP status; the routes never choose a status themselves, the one error
 * handler in plugins/errors.ts does, from here.
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
} as const)

export type ApiErrorCode = keyof typeof HTTP_STATUS

export class ApiError extends Error {
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
    this.name = 'ApiError'
    this.status = HTTP_STATUS[code]
  }
}

export const invalid = (field: string, rule: string) =>
  new ApiError('INVALID_REQUEST', `${field}: ${rule}`, { field, rule })

export const busy = (why: string, retryAfterS = 1, cause?: unknown) =>
  new ApiError('BUSY', `${why}; retry after ${retryAfterS} s`, {}, retryAfterS, { cause })

export const unavailable = (why: string, retryAfterS = 2, cause?: unknown) =>
  new ApiError('UNAVAILABLE', `${why}; retry after ${retryAfterS} s`, {}, retryAfterS, { cause })
