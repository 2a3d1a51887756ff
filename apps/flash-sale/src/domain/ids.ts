import { randomBytes } from 'node:crypto'

/**
 * Product and user ids: positive integers or short id strings, normalised to strings so that
 * 9921 and "9921" are the same product (routes/schemas.ts checks them). The string form excludes
 * '.' because order ids embed the product id before a '.', which is how an order is found on its
 * sale's hash slot.
 */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/
export const ID_RULE = 'a positive integer or 1-64 characters of A-Z a-z 0-9 _ -'

/** `<product_id>.<time base36><random>`: unique, roughly time-ordered, routable to the sale. */
export function newOrderId(productId: string): string {
  return `${productId}.${Date.now().toString(36)}${randomBytes(9).toString('base64url')}`
}

export function productOfOrder(orderId: string): string | undefined {
  const i = orderId.indexOf('.')
  if (i <= 0 || orderId.length > 128) return undefined
  const product = orderId.slice(0, i)
  return ID_PATTERN.test(product) ? product : undefined
}
