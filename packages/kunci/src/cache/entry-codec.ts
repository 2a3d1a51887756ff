/**
 * Values ↔ stored entries (see serializer.ts for the format), for Redis and for L1. Decoding
 * never throws: an unreadable entry is reported and treated as absent, so a foreign or corrupt
 * value costs one reload instead of failing every read of the key.
 */
import { CacheSerializeError } from '../errors.js'
import type { CacheEmitter } from './cache-events.js'
import type { ResolvedEntryOptions } from './cache-options.js'
import { copyJson } from './json-copy.js'
import type { L1Entry } from './l1.js'
import type { HeaderFields, Serializer } from './serializer.js'
import { encodeEntry, jsonSerializer, parseHeader } from './serializer.js'

/** A decoded entry: `value` is `undefined` for a cached "not found". */
export interface Found<T> {
  readonly value: T | undefined
  readonly expiresAt: number
  /** expiresAt + grace: never served after this. */
  readonly staleUntil: number
  readonly deltaMs: number
  /** The serialised payload, kept for L1. */
  readonly payload: string
}

export interface Encoded {
  readonly raw: string
  /** PX of the value key: ttl (jittered) + grace. */
  readonly physicalMs: number
}

export class EntryCodec {
  readonly #serializer: Serializer
  readonly #events: CacheEmitter
  readonly #l1Serialize: boolean
  /** The default JSON serializer: an L1 hit copies a parsed value instead of parsing (json-copy.ts). */
  readonly #json: boolean
  // Reused by every decode: the header is copied out before the next one can run.
  readonly #header: HeaderFields = { kind: 'v', expiresAt: 0, graceMs: 0, deltaMs: 0, payloadStart: 0 }

  constructor(serializer: Serializer, l1Serialize: boolean, events: CacheEmitter) {
    this.#serializer = serializer
    this.#l1Serialize = l1Serialize
    this.#json = serializer === jsonSerializer
    this.#events = events
  }

  decode<T>(key: string, raw: string): Found<T> | undefined {
    const h = this.#header
    try {
      if (!parseHeader(raw, h)) throw new TypeError('not a kunci cache entry')
      const payload = h.kind === 'n' ? '' : raw.slice(h.payloadStart)
      const value = h.kind === 'n' ? undefined : (this.#serializer.deserialize(payload) as T)
      return {
        value,
        expiresAt: h.expiresAt,
        staleUntil: h.expiresAt + h.graceMs,
        deltaMs: h.deltaMs,
        payload,
      }
    } catch (err) {
      const error = new CacheSerializeError(key, 'deserialize', { cause: err })
      this.#events.emit('error', { key, operation: 'deserialize', error })
      return undefined
    }
  }

  /**
   * Encodes a loaded value (`undefined` = "not found") for writing; `undefined` when nothing is
   * to be written (a "not found" with negativeTtlMs 0).
   * @throws CacheSerializeError before any I/O.
   */
  encode(key: string, value: unknown, opts: ResolvedEntryOptions, deltaMs: number): Encoded | undefined {
    const now = Date.now()
    if (value === undefined) {
      if (opts.negativeTtlMs === 0) return undefined
      return {
        raw: encodeEntry('n', now + opts.negativeTtlMs, 0, deltaMs, ''),
        physicalMs: opts.negativeTtlMs,
      }
    }
    let payload: string
    try {
      payload = this.#serializer.serialize(value)
      if (typeof payload !== 'string') throw new TypeError('serializer.serialize must return a string')
    } catch (err) {
      throw new CacheSerializeError(key, 'serialize', { cause: err })
    }
    const ttl =
      opts.jitter > 0 ? Math.max(1, Math.round(opts.ttlMs * (1 - opts.jitter * Math.random()))) : opts.ttlMs
    return {
      raw: encodeEntry('v', now + ttl, opts.graceMs, deltaMs, payload),
      physicalMs: ttl + opts.graceMs,
    }
  }

  toL1<T>(found: Found<T>): L1Entry {
    const notFound = found.value === undefined
    return {
      kind: notFound ? 'n' : 'v',
      expiresAt: found.expiresAt,
      staleUntil: found.staleUntil,
      deltaMs: found.deltaMs,
      data: this.#l1Serialize ? found.payload : found.value,
      parsed: undefined,
    }
  }

  fromL1<T>(e: L1Entry): Found<T> {
    return {
      value: this.valueFromL1<T>(e),
      expiresAt: e.expiresAt,
      staleUntil: e.staleUntil,
      deltaMs: e.deltaMs,
      payload: this.#l1Serialize ? (e.data as string) : '',
    }
  }

  /**
   * The value of an L1 entry for one caller: its own object when L1 serialises. With the JSON
   * serializer, a copy of the entry's parsed value (the same as parsing the text again, ≈10×
   * cheaper); with another serializer, `deserialize` as before.
   */
  valueFromL1<T>(e: L1Entry): T | undefined {
    if (e.kind === 'n') return undefined
    if (!this.#l1Serialize) return e.data as T
    if (!this.#json) return this.#serializer.deserialize(e.data as string) as T
    let parsed = e.parsed
    if (parsed === undefined) parsed = e.parsed = JSON.parse(e.data as string)
    // A primitive is immutable: every caller can have it as is.
    if (typeof parsed !== 'object' || parsed === null) return parsed as T
    try {
      return copyJson(parsed) as T
    } catch {
      // Nested deeper than the stack allows a recursive copy: JSON.parse does not recurse.
      return JSON.parse(e.data as string) as T
    }
  }
}
