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

/** Parses the header; `undefined` when the text was not written by this cache (foreign or corrupt). */
export function decodeEntry(raw: string): DecodedEntry | undefined {
  const kind = raw.charCodeAt(0)
  if (kind !== 0x76 /* v */ && kind !== 0x6e /* n */) return undefined
  const a = raw.indexOf(':', 1)
  const b = a < 0 ? -1 : raw.indexOf(':', a + 1)
  const c = b < 0 ? -1 : raw.indexOf(':', b + 1)
  if (c < 0) return undefined
  const expiresAt = Number(raw.slice(1, a))
  const graceMs = Number(raw.slice(a + 1, b))
  const deltaMs = Number(raw.slice(b + 1, c))
  if (!Number.isInteger(expiresAt) || !Number.isInteger(graceMs) || !Number.isInteger(deltaMs) || a === 1) {
    return undefined
  }
  return { kind: kind === 0x76 ? 'v' : 'n', expiresAt, graceMs, deltaMs, payload: raw.slice(c + 1) }
}
