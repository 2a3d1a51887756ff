import type { Strategy } from '../config.js'
import { ApiError } from '../domain/errors.js'

export interface CheckoutRequest {
  productId: string
  userId: string
  idempotencyKey: string | undefined
}

/**
 * What a successful checkout answers. `reserved`: the unit is held in Redis and the order is on
 * its way to SQL (lua, naive); `confirmed`: written in SQL already (redlock); `pending`: reserved,
 * but the replica did not confirm in time (HTTP 202): poll GET /v1/orders/:order_id.
 */
export interface CheckoutResult {
  orderId: string
  status: 'reserved' | 'confirmed' | 'pending'
  /** Units left after this checkout, when the strategy knows it cheaply. */
  remaining?: number
  replayed: boolean
}

export interface CheckoutStrategy {
  readonly name: Strategy
  /** Resolves with the order, or throws ApiError (409 codes, 404, 422, 429, 503). */
  checkout(request: CheckoutRequest): Promise<CheckoutResult>
  /** Units left, for GET /v1/products. */
  remaining(productId: string): Promise<number | undefined>
  close(): Promise<void>
}

/** The 409/404/422 answers a reservation can end with, from the script's code. */
export function refusal(code: string, productId: string, orderId?: string): ApiError {
  switch (code) {
    case 'SOLD_OUT':
      return new ApiError('SOLD_OUT', `product ${productId} is sold out`)
    case 'ALREADY_PURCHASED':
      return new ApiError(
        'ALREADY_PURCHASED',
        `this user already bought product ${productId} in this sale (see order_id)`,
        { order_id: orderId },
      )
    case 'SALE_NOT_STARTED':
      return new ApiError('SALE_NOT_STARTED', `the sale of product ${productId} has not started yet`)
    case 'SALE_ENDED':
      return new ApiError('SALE_ENDED', `the sale of product ${productId} has ended`)
    case 'UNKNOWN_PRODUCT':
      return new ApiError('UNKNOWN_PRODUCT', `product ${productId} has no sale`)
    case 'IDEMPOTENCY_KEY_REUSED':
      return new ApiError(
        'IDEMPOTENCY_KEY_REUSED',
        'this Idempotency-Key was used by another request (another user); use a new key per checkout',
      )
    default:
      return new ApiError('INTERNAL', `unexpected reservation answer ${code}`)
  }
}
