/**
 * The optional in-process tier: a bounded LRU in front of Redis.
 *
 * Coherence: every write and delete is published on the bus, and each process drops the key
 * from its L1 when the message arrives. A fill races with those messages: a value read from
 * Redis just before another process overwrote it can come back after the invalidation. So
 * every fill carries the invalidation sequence number observed before its Redis call, and is
 * refused if the key (or a prefix of it, or everything) was invalidated since.
 */

export interface L1Entry {
  readonly kind: 'v' | 'n'
  readonly expiresAt: number
  /** expiresAt + grace: never served after this. */
  readonly staleUntil: number
  readonly deltaMs: number
  /** Serialised payload (when L1 serialises) or the value itself. */
  readonly data: unknown
  /**
   * With the JSON serializer: `data` parsed on the first hit, never handed out, only copied
   * (entry-codec.ts). `undefined` until then (JSON.parse never returns undefined).
   */
  parsed?: unknown
}

// Invalidation bookkeeping is dropped (and every older fill refused) beyond these sizes.
const MAX_TRACKED_KEYS = 10_000
const MAX_TRACKED_PREFIXES = 64

export class L1 {
  readonly #max: number
  readonly #entries = new Map<string, L1Entry>()
  #seq = 0
  /** Fills that began before this sequence number are refused (a clear or a bookkeeping reset). */
  #floor = 0
  readonly #keySeq = new Map<string, number>()
  #prefixSeq: { prefix: string; seq: number }[] = []

  constructor(maxEntries: number) {
    this.#max = maxEntries
  }

  get size(): number {
    return this.#entries.size
  }

  /** The sequence number to pass to `fill` for a Redis call that starts now. */
  mark(): number {
    return this.#seq
  }

  get(key: string): L1Entry | undefined {
    const e = this.#entries.get(key)
    if (e === undefined) return undefined
    // Re-insert: Map keeps insertion order, so the first key is the least recently used.
    this.#entries.delete(key)
    this.#entries.set(key, e)
    return e
  }

  /** Stores `entry` unless `key` was invalidated after `mark`. */
  fill(key: string, entry: L1Entry, mark: number): void {
    if (mark < this.#floor) return
    const k = this.#keySeq.get(key)
    if (k !== undefined && k > mark) return
    for (const p of this.#prefixSeq) if (p.seq > mark && key.startsWith(p.prefix)) return
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next().value as string
      this.#entries.delete(oldest)
    }
  }

  invalidate(key: string): void {
    this.#entries.delete(key)
    this.#keySeq.set(key, ++this.#seq)
    if (this.#keySeq.size > MAX_TRACKED_KEYS) this.#reset()
  }

  invalidatePrefix(prefix: string): void {
    for (const key of this.#entries.keys()) if (key.startsWith(prefix)) this.#entries.delete(key)
    this.#prefixSeq.push({ prefix, seq: ++this.#seq })
    if (this.#prefixSeq.length > MAX_TRACKED_PREFIXES) this.#reset()
  }

  clear(): void {
    this.#entries.clear()
    ++this.#seq
    this.#reset()
  }

  #reset(): void {
    this.#floor = this.#seq
    this.#keySeq.clear()
    this.#prefixSeq = []
  }
}
