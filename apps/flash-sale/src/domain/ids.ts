import { randomBytes } from 'node:crypto'

/**
 * Product and user ids: positive integers or short id strings, normalised to strings so that
 * 9921 and "9921" are the same product (routes/schemas.ts checks them). The string form excludes
 * '.' because order ids embed the product id before a '.', which is how an order is found on its
 * sale's hash slot.
 */
const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/
export const ID_RULE = 'a positive integer or 1-64 characters of A-Z a-z 0-9 _ -'

/** Random bytes per order id (72 bits: unguessable, and unique in any sale's lifetime). */
const ID_RANDOM_BYTES = 9
/**
 * Ids drawn per call to the system's random source: one randomBytes() per order cost ~4 % of a
 * reservation's CPU (a synchronous call into libuv's crypto job each time), one per 512 ids
 * costs nothing. The bytes are as random; each is used once.
 */
const IDS_PER_DRAW = 512
/** base64url characters of the random part: 4 per 3 bytes. */
const RANDOM_CHARS = (ID_RANDOM_BYTES / 3) * 4
let pool = Buffer.alloc(0)
let at = 0

/** `<product_id>.<time base36><random>`: unique, roughly time-ordered, routable to the sale. */
export function newOrderId(productId: string): string {
  if (at + ID_RANDOM_BYTES > pool.length) {
    pool = randomBytes(ID_RANDOM_BYTES * IDS_PER_DRAW)
    at = 0
  }
  const random = pool.toString('base64url', at, at + ID_RANDOM_BYTES)
  at += ID_RANDOM_BYTES
  return `${productId}.${Date.now().toString(36)}${random}`
}

/**
 * When an order id was made (ms), from its time part (newOrderId); undefined if it is not of
 * that form. Only ever a lower bound of anything: ids are made by the service, but anyone can
 * write one.
 */
export function orderIdTime(orderId: string): number | undefined {
  const rest = orderId.slice(orderId.indexOf('.') + 1)
  const time = rest.slice(0, -RANDOM_CHARS)
  if (rest.length <= RANDOM_CHARS || !/^[0-9a-z]{1,11}$/.test(time)) return undefined
  const ms = Number.parseInt(time, 36)
  return Number.isSafeInteger(ms) ? ms : undefined
}

/**
 * An order neither Redis nor SQL holds may still appear for this long after its id was made: the
 * worker may be holding its event back (no replica confirmed it yet), or a reset dropped its
 * status while its event waits to be persisted as stale_round. Past it, such an order was lost (a
 * failover promoted a replica that never had it: only a 202 can be lost so).
 */
export const ORDER_LOST_AFTER_MS = 30_000

/** Could an order that no store holds now still appear (see ORDER_LOST_AFTER_MS)? */
export function mayStillAppear(orderId: string, now = Date.now()): boolean {
  const madeAt = orderIdTime(orderId)
  return madeAt !== undefined && now - madeAt <= ORDER_LOST_AFTER_MS
}

export function productOfOrder(orderId: string): string | undefined {
  const i = orderId.indexOf('.')
  if (i <= 0 || orderId.length > 128) return undefined
  const product = orderId.slice(0, i)
  return ID_PATTERN.test(product) ? product : undefined
}
