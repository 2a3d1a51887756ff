/**
 * Redis Cluster key → hash slot, computed exactly as the server does (`CLUSTER KEYSLOT`):
 * CRC16-XMODEM (polynomial 0x1021, initial value 0, no reflection) of the key's bytes, modulo
 * 16384, where a non-empty hash tag `{...}` replaces the key.
 *
 * This runs on every lock and cache call, so strings are hashed straight from their UTF-16 code
 * units, encoding to UTF-8 on the fly: no Buffer is allocated, whatever the key holds.
 */

/** Number of hash slots in a Redis Cluster; slots are `0 .. SLOT_COUNT - 1`. */
export const SLOT_COUNT = 16384

const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d

// One entry per value of the high byte: the byte-at-a-time form of the bitwise CRC.
const CRC16_TABLE: Uint16Array = (() => {
  const table = new Uint16Array(256)
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[byte] = crc
  }
  return table
})()

function step(crc: number, byte: number): number {
  return ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >>> 8) ^ byte) & 0xff]!
}

/** CRC16-XMODEM of `bytes[start..end)`. */
function crcBytes(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0
  for (let i = start; i < end; i++) crc = step(crc, bytes[i]!)
  return crc
}

/**
 * CRC16-XMODEM of the UTF-8 encoding of `s[start..end)`. The encoding matches
 * `Buffer.from(s, 'utf8')`, which is what ioredis sends: a lone surrogate becomes U+FFFD.
 */
function crcString(s: string, start: number, end: number): number {
  let crc = 0
  for (let i = start; i < end; i++) {
    let c = s.charCodeAt(i)
    if (c < 0x80) {
      crc = step(crc, c)
      continue
    }
    if (c < 0x800) {
      crc = step(crc, 0xc0 | (c >>> 6))
      crc = step(crc, 0x80 | (c & 0x3f))
      continue
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < end ? s.charCodeAt(i + 1) : 0
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        const cp = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00)
        i++
        crc = step(crc, 0xf0 | (cp >>> 18))
        crc = step(crc, 0x80 | ((cp >>> 12) & 0x3f))
        crc = step(crc, 0x80 | ((cp >>> 6) & 0x3f))
        crc = step(crc, 0x80 | (cp & 0x3f))
        continue
      }
      c = 0xfffd
    }
    crc = step(crc, 0xe0 | (c >>> 12))
    crc = step(crc, 0x80 | ((c >>> 6) & 0x3f))
    crc = step(crc, 0x80 | (c & 0x3f))
  }
  return crc
}

// Braces are ASCII and never occur inside a multi-byte UTF-8 sequence, so searching a string's
// code units finds the same braces the server finds in the bytes, and "at least one byte
// between" is "at least one code unit between". Two searches instead of a [start, end] tuple
// keep keySlot free of allocations.

/** Index of the first `{`, or -1. */
function openBrace(key: string | Uint8Array): number {
  return typeof key === 'string' ? key.indexOf('{') : key.indexOf(OPEN_BRACE)
}

/** Index of the `}` closing a non-empty tag opened at `open`, or -1 when the whole key is hashed. */
function closeBrace(key: string | Uint8Array, open: number): number {
  if (open < 0) return -1
  const close = typeof key === 'string' ? key.indexOf('}', open + 1) : key.indexOf(CLOSE_BRACE, open + 1)
  return close > open + 1 ? close : -1
}

/**
 * The hash slot Redis Cluster assigns to `key` (`0 .. 16383`); equal to `CLUSTER KEYSLOT key`.
 *
 * Hash-tag rule: when the key contains a `{` and, after it, a `}` with at least one byte in
 * between, only the bytes between the first `{` and the first `}` after it are hashed. An empty
 * tag (`{}`) or a `{` with no `}` after it hashes the whole key.
 *
 * @example keySlot('{user1000}.following') === keySlot('{user1000}.followers')
 */
export function keySlot(key: string | Uint8Array): number {
  const open = openBrace(key)
  const close = closeBrace(key, open)
  const start = close < 0 ? 0 : open + 1
  const end = close < 0 ? key.length : close
  const crc = typeof key === 'string' ? crcString(key, start, end) : crcBytes(key, start, end)
  return crc & (SLOT_COUNT - 1)
}

/**
 * The hash tag of `key` (the text between the braces), or `undefined` when the whole key is
 * hashed. For a Buffer key the tag bytes are decoded as UTF-8, which is lossy for bytes that are
 * not valid UTF-8; use `keySlot` to compare such keys.
 *
 * @example hashTag('foo{{bar}}zap') === '{bar'; hashTag('foo{}{bar}') === undefined
 */
export function hashTag(key: string | Uint8Array): string | undefined {
  const open = openBrace(key)
  const close = closeBrace(key, open)
  if (close < 0) return undefined
  return typeof key === 'string'
    ? key.slice(open + 1, close)
    : Buffer.from(key.buffer, key.byteOffset + open + 1, close - open - 1).toString('utf8')
}
