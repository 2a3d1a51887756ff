import { randomFillSync } from 'node:crypto'

/**
 * 128-bit random holder tokens, hex encoded. Drawn from a pooled buffer refilled 256 tokens at
 * a time: one getrandom() call instead of one per acquisition, which shows at high rates.
 */
const TOKEN_BYTES = 16
/** Hex length of a token; the Lua scripts rely on it (TOKEN_LENGTH) to find a waiter's mark. */
export const TOKEN_LENGTH = TOKEN_BYTES * 2
const pool = Buffer.allocUnsafe(TOKEN_BYTES * 256)
let offset = pool.length

export function randomToken(): string {
  if (offset === pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const token = pool.toString('hex', offset, offset + TOKEN_BYTES)
  offset += TOKEN_BYTES
  return token
}
