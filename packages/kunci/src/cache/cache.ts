/**
 * A read-through cache on one Redis or a Redis Cluster that calls the loader at most once per
 * key per refresh across every process (stampede.ts has the protocol, read-through.ts the read
 * path), serves stale values within a grace period, refreshes hot keys before they expire
 * (XFetch), and can keep an L1 in memory that the bus keeps coherent. docs/cache.md states the
 * guarantees and their limits.
 */
import { deleteMatching } from '../cluster/scan.js'
import { CacheSerializeError, CacheUnavailableError, ClosedError, InvalidOptionError } from '../errors.js'
import type { RedisPort } from '../redis/port.js'
import { Bus, type BusMessageType, busMessage, newInstanceId } from './bus.js'
import type { CacheEventName, CacheListener } from './cache-events.js'
import { CacheEmitter } from './cache-events.js'
import { busChannel, entryKeys, entryPattern, valueKey } from './cache-keys.js'
import type {
  CacheOptions,
  EntryOptions,
  ResolvedCacheOptions,
  ResolvedEntryOptions,
} from './cache-options.js'
import { resolveCacheOptions, resolveEntryOptions } from './cache-options.js'
import { EntryCodec, type Found } from './entry-codec.js'
import { L1, type L1Entry } from './l1.js'
import { type Loader, ReadThrough } from './read-through.js'
import { deleteEntry, shouldRefreshEarly } from './stampede.js'
import { Waiters } from './waiters.js'

export interface GetOrSetOptions<T> extends EntryOptions {
  key: string
  /** Returns the value, or `undefined` for "not found" (cached for `negativeTtlMs`). */
  loader: Loader<T>
}

export interface SetOptions<T> extends Pick<EntryOptions, 'ttlMs' | 'graceMs' | 'jitter'> {
  key: string
  /** Any serialisable value, `null` included; use `delete()` to remove a key. */
  value: T
}

export class Cache {
  readonly #o: ResolvedCacheOptions
  readonly #client: RedisPort
  readonly #id = newInstanceId()
  readonly #channel: string
  readonly #events = new CacheEmitter()
  readonly #codec: EntryCodec
  readonly #waiters = new Waiters()
  readonly #l1: L1 | undefined
  readonly #bus: Bus
  readonly #reads: ReadThrough
  #closed = false

  constructor(options: CacheOptions) {
    this.#o = resolveCacheOptions(options)
    this.#client = this.#o.client
    this.#channel = busChannel(this.#o.prefix)
    this.#codec = new EntryCodec(this.#o.serializer, this.#o.l1Serialize, this.#events)
    this.#l1 = this.#o.l1MaxEntries > 0 ? new L1(this.#o.l1MaxEntries) : undefined
    this.#bus = new Bus(this.#client, this.#channel, this.#o.busHeartbeatMs, `kunci-cache-bus-${this.#id}`, {
      message: (type, sender, subject) => this.#onBusMessage(type, sender, subject),
      state: (up, reason, error) => {
        // On a drop, messages may be lost from now on; on the way back up, fills that started
        // while we were deaf must not land either. Both are handled by clearing (see l1.ts).
        this.#l1?.clear()
        if (up) return this.#events.emit('bus-up', {})
        this.#events.emit('bus-drop', { reason })
        if (error) this.#events.emit('error', { key: undefined, operation: 'bus', error })
      },
    })
    this.#reads = new ReadThrough({
      client: this.#client,
      options: this.#o,
      id: this.#id,
      channel: this.#channel,
      events: this.#events,
      codec: this.#codec,
      waiters: this.#waiters,
      l1Mark: () => this.#l1?.mark() ?? 0,
      l1Fill: (key, found, mark) => this.#fillL1(key, found, mark),
      isClosed: () => this.#closed,
      assertOpen: () => this.#assertOpen(),
    })
    this.#bus.start()
  }

  /** Subscribes to an event (see `CacheEvents`); returns the unsubscribe function. */
  on<E extends CacheEventName>(name: E, listener: CacheListener<E>): () => void {
    return this.#events.on(name, listener)
  }

  off<E extends CacheEventName>(name: E, listener: CacheListener<E>): void {
    this.#events.off(name, listener)
  }

  /**
   * Random id of this cache instance: in lease tokens, bus messages and the bus connection's
   * name (`kunci-cache-bus-<id>` in CLIENT LIST).
   */
  get instanceId(): string {
    return this.#id
  }

  /** Whether the bus is subscribed (L1 is only used while it is). */
  get busConnected(): boolean {
    return this.#bus.up
  }

  /**
   * The cached value of `key`, or the loader's result. Concurrent calls for one key share one
   * promise in this process and one loader call across all processes; the first caller's
   * options and loader are used.
   */
  getOrSet<T>(options: GetOrSetOptions<T>): Promise<T> {
    let key: string
    let opts: ResolvedEntryOptions
    try {
      this.#assertOpen()
      key = checkKey(options?.key)
      if (typeof options.loader !== 'function') {
        throw new InvalidOptionError(
          'loader',
          'must be a function returning the value (or undefined for "not found").',
        )
      }
      opts = resolveEntryOptions(options, this.#o.entry)
    } catch (err) {
      return Promise.reject(err)
    }
    const e = this.#l1Entry(key)
    if (e !== undefined) {
      // The XFetch draw reads the entry itself: a hit builds no Found unless it refreshes.
      const now = Date.now()
      if (now < e.expiresAt) {
        if (this.#events.has('hit')) this.#events.emit('hit', { key, tier: 'l1' })
        if (shouldRefreshEarly(now, e.expiresAt, e.deltaMs, opts.beta)) {
          this.#reads.startEarlyRefresh(key, options.loader, opts, this.#codec.fromL1<T>(e), now)
        }
        return Promise.resolve(this.#codec.valueFromL1<T>(e) as T)
      }
    }
    return this.#reads.getOrSet(key, options.loader, opts)
  }

  /** The fresh cached value (a cached `null` included), or `undefined` when absent, expired or "not found". */
  async get<T>(key: string): Promise<T | undefined> {
    this.#assertOpen()
    checkKey(key)
    const hit = this.#fromL1<T>(key)
    if (hit !== undefined) return hit.value
    const mark = this.#l1?.mark() ?? 0
    let raw: string | null
    try {
      raw = await this.#client.read(valueKey(this.#o.prefix, key))
    } catch (err) {
      throw new CacheUnavailableError(key, 'get', { cause: err })
    }
    const found = raw === null ? undefined : this.#codec.decode<T>(key, raw)
    if (found === undefined || found.expiresAt <= Date.now()) {
      this.#events.emit('miss', { key })
      return undefined
    }
    this.#fillL1(key, found, mark)
    if (this.#events.has('hit')) this.#events.emit('hit', { key, tier: 'l2' })
    return found.value
  }

  /** Writes `value` at once, cancelling any load in flight for the key (its result is not written). */
  async set<T>(options: SetOptions<T>): Promise<void> {
    this.#assertOpen()
    const key = checkKey(options?.key)
    if (options.value === undefined) {
      throw new InvalidOptionError(
        'value',
        'undefined cannot be cached as a value; use delete(key) to remove a key.',
      )
    }
    const opts = resolveEntryOptions(options, this.#o.entry)
    try {
      await this.#reads.write(key, entryKeys(this.#o.prefix, key), options.value, opts, 0, '')
    } catch (err) {
      if (err instanceof CacheSerializeError) throw err
      throw new CacheUnavailableError(key, 'set', { cause: err })
    }
  }

  /** Removes `key` everywhere (Redis, every L1) and cancels a load in flight. Resolves whether it existed. */
  async delete(key: string): Promise<boolean> {
    this.#assertOpen()
    checkKey(key)
    this.#l1?.invalidate(key)
    try {
      return await deleteEntry(
        this.#client,
        entryKeys(this.#o.prefix, key),
        this.#channel,
        busMessage('k', this.#id, key),
      )
    } catch (err) {
      throw new CacheUnavailableError(key, 'delete', { cause: err })
    }
  }

  /**
   * Removes every entry whose key starts with `keyPrefix` ('' for all) on every master, with
   * SCAN (never KEYS), and from every L1. Resolves the number of Redis keys deleted (values and
   * leases). Entries written while it runs may survive.
   */
  async invalidatePrefix(keyPrefix: string): Promise<number> {
    this.#assertOpen()
    if (typeof keyPrefix !== 'string') throw new InvalidOptionError('keyPrefix', 'must be a string.')
    this.#l1?.invalidatePrefix(keyPrefix)
    try {
      const deleted = await deleteMatching(this.#client, { match: entryPattern(this.#o.prefix, keyPrefix) })
      await this.#client.send('publish', [this.#channel, busMessage('p', this.#id, keyPrefix)])
      return deleted
    } catch (err) {
      throw new CacheUnavailableError(undefined, 'invalidatePrefix', { cause: err })
    }
  }

  /** Stops the bus (the only connection the cache opened). The client passed in stays open. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#waiters.wakeAll()
    await this.#bus.close()
  }

  /** The L1 entry of `key`, fresh or not, when L1 may be used (bus up). */
  #l1Entry(key: string): L1Entry | undefined {
    return this.#l1 === undefined || !this.#bus.up ? undefined : this.#l1.get(key)
  }

  #fromL1<T>(key: string): Found<T> | undefined {
    const e = this.#l1Entry(key)
    if (e === undefined || e.expiresAt <= Date.now()) return undefined
    if (this.#events.has('hit')) this.#events.emit('hit', { key, tier: 'l1' })
    return this.#codec.fromL1<T>(e)
  }

  #fillL1(key: string, found: Found<unknown>, mark: number): void {
    if (this.#l1 === undefined || !this.#bus.up) return
    this.#l1.fill(key, this.#codec.toL1(found), mark)
  }

  #onBusMessage(type: BusMessageType, sender: string, subject: string): void {
    if (type === 'p') {
      this.#waiters.wakePrefix(subject)
      if (sender !== this.#id) this.#l1?.invalidatePrefix(subject)
      return
    }
    this.#waiters.wake(subject)
    // Our own writes already updated our L1 (under the same race check as any fill).
    if (type === 'k' && sender !== this.#id) this.#l1?.invalidate(subject)
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('Cache')
  }
}

function checkKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new InvalidOptionError(
      'key',
      `must be a non-empty string, got ${key === '' ? 'an empty string' : typeof key}.`,
    )
  }
  return key
}
