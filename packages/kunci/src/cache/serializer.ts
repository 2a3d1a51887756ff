/**
 * Values are stored as one Redis string: a small header the Lua scripts can read with one
 * pattern match, then the serialised value.
 *
 *   <kind><expiresAt>:<graceMs>:<deltaMs>:<payload>
 *
 * kind      `v` a value, `n` "not found" (negative entry, empty payload)
 * expiresAt end of freshness, ms since the epoch, by the writer's clock
 * graceMs   how long after expiresAt the entry may be served stale (Redis deletes it then)
 * deltaMs   how long the loader took (XFetch δ)
 *
 * One string keeps a hit to a single GET, like the peers, and `null` (payload `null`) apart
 * from "not found" (kind `n`) and from "absent" (no key).
 */

/** Turns values into text and back. Both may throw; errors become `CacheSerializeError`. */
export interface Serializer {
  serialize(value: unknown): string
  deserialize(text: string): unknown
}

/**
 * JSON. `JSON.stringify` throws on BigInt and cycles; it returns `undefined` for a function or a
 * symbol at the top level, which we treat as unserialisable too rather than caching nothing.
 */
export const jsonSerializer: Serializer = Object.freeze({
  serialize(value: unknown): string {
    const text = JSON.stringify(value)
    if (typeof text !== 'string') throw new TypeError(`${typeof value} is not JSON-serialisable`)
    return text
  },
  deserialize(text: string): unknown {
    return JSON.parse(text)
  },
})

export type EntryKind = 'v' | 'n'

export interface DecodedEntry {
  readonly kind: EntryKind
  readonly expiresAt: number
  readonly graceMs: number
  readonly deltaMs: number
  /** Serialised value; empty for `n`. */
  readonly payload: string
}

export function encodeEntry(
  kind: EntryKind,
  expiresAt: number,
  graceMs: number,
  deltaMs: number,
  payload: string,
): string {
  return kind + expiresAt + ':' + graceMs + ':' + deltaMs + ':' + payload
}

/** The header fields, filled in place by `parseHeader` (no allocation on the hit path). */
export interface HeaderFields {
  kind: EntryKind
  expiresAt: number
  graceMs: number
  deltaMs: number
  /** Index of the first payload character in the raw text. */
  payloadStart: number
}

/**
 * Reads the header of `raw` into `out`; false when the text was not written by this cache
 * (foreign or corrupt). Digits are accumulated by hand: a hit parses three numbers and slicing
 * them into strings first would be three garbage strings per read.
 */
export function parseHeader(raw: string, out: HeaderFields): boolean {
  const kind = raw.charCodeAt(0)
  if (kind !== 0x76 /* v */ && kind !== 0x6e /* n */) return false
  let i = digitsThenColon(raw, 1)
  if (i < 0) return false
  out.expiresAt = parsed
  i = digitsThenColon(raw, i)
  if (i < 0) return false
  out.graceMs = parsed
  i = digitsThenColon(raw, i)
  if (i < 0) return false
  out.deltaMs = parsed
  out.kind = kind === 0x76 ? 'v' : 'n'
  out.payloadStart = i
  return true
}

let parsed = 0

/** Reads 1-16 digits at `raw[i]` and the ':' after them: the index after ':' (number in `parsed`), or -1. */
function digitsThenColon(raw: string, i: number): number {
  const start = i
  let n = 0
  let c = raw.charCodeAt(i)
  while (c >= 0x30 && c <= 0x39) {
    n = n * 10 + (c - 0x30)
    c = raw.charCodeAt(++i)
  }
  if (i === start || i - start > 16 || c !== 0x3a /* : */) return -1
  parsed = n
  return i + 1
}

/** Parses the header; `undefined` when the text was not written by this cache (foreign or corrupt). */
export function decodeEntry(raw: string): DecodedEntry | undefined {
  const h: HeaderFields = { kind: 'v', expiresAt: 0, graceMs: 0, deltaMs: 0, payloadStart: 0 }
  if (!parseHeader(raw, h)) return undefined
  return {
    kind: h.kind,
    expiresAt: h.expiresAt,
    graceMs: h.graceMs,
    deltaMs: h.deltaMs,
    payload: raw.slice(h.payloadStart),
  }
}
