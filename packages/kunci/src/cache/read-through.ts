/**
 * The read-through path of `getOrSet`: single-flight in the process, then the lease protocol
 * of stampede.ts across processes, the grace period, the soft and hard timeouts, XFetch early
 * refresh, and the fail-open fallback when Redis fails. The public facade is cache.ts.
 */
import {
  CacheLoaderError,
  CacheLoaderTimeoutError,
  CacheSerializeError,
  CacheUnavailableError,
} from '../errors.js'
import type { RedisPort } from '../redis/port.js'
import { busMessage } from './bus.js'
import type { CacheEmitter } from './cache-events.js'
import { type EntryKeys, entryKeys, valueKey } from './cache-keys.js'
import type { ResolvedCacheOptions, ResolvedEntryOptions } from './cache-options.js'
import type { EntryCodec, Found } from './entry-codec.js'
import { fetchOrLease, keepLease, releaseLease, shouldRefreshEarly, writeEntry } from './stampede.js'
import { settleWithin, sleepUnless } from './timeouts.js'
import type { Waiters } from './waiters.js'

export interface LoaderContext<T> {
  readonly key: string
  /** The expired value being refreshed, if one is still within grace. */
  readonly stale: T | undefined
  /** Aborted at the hard timeout: nobody waits for the result any more. */
  readonly signal: AbortSignal
}

/** Returns the value, or `undefined` for "not found" (cached for `negativeTtlMs`). */
export type Loader<T> = (context: LoaderContext<T>) => T | undefined | Promise<T | undefined>

/** What the read path needs from the cache that owns it. */
export interface ReadThroughContext {
  readonly client: RedisPort
  readonly options: ResolvedCacheOptions
  /** Instance id: in lease tokens and bus messages. */
  readonly id: string
  readonly channel: string
  readonly events: CacheEmitter
  readonly codec: EntryCodec
  readonly waiters: Waiters
  /** L1 sequence mark to take before a Redis call whose result may be put in L1. */
  l1Mark(): number
  /** Puts a value read or written at `mark` in L1 (a no-op without L1 or without the bus). */
  l1Fill(key: string, found: Found<unknown>, mark: number): void
  isClosed(): boolean
  /** @throws ClosedError */
  assertOpen(): void
}

/** One load of a key by this process: what `#loadAsHolder` is given. */
interface LoadJob<T> {
  readonly key: string
  readonly keys: EntryKeys
  readonly loader: Loader<T>
  readonly opts: ResolvedEntryOptions
  /** Our lease token, or '' to load and write without a lease. */
  readonly token: string
  /** Served on a soft time-out or a failed load, when there is one. */
  readonly stale?: Found<T>
  /** Date.now() by which the load must have finished (the hard time-out). */
  readonly deadline: number
  /** An early (XFetch) refresh, reported as such. @defaultValue false */
  readonly early?: boolean
  /** The caller waits for the write too; false when Redis is failing. @defaultValue true */
  readonly awaitWrite?: boolean
}

export class ReadThrough {
  readonly #c: ReadThroughContext
  readonly #inflight = new Map<string, Promise<unknown>>()
  readonly #refreshing = new Set<string>()
  #tokens = 0

  constructor(context: ReadThroughContext) {
    this.#c = context
  }

  /** Joins the call in flight for `key` in this process, or starts one. */
  getOrSet<T>(key: string, loader: Loader<T>, opts: ResolvedEntryOptions): Promise<T> {
    const running = this.#inflight.get(key)
    if (running !== undefined) {
      this.#c.events.emit('coalesced', { key, scope: 'process' })
      return running as Promise<T>
    }
    const promise = this.#read(key, loader, opts)
    this.#inflight.set(key, promise)
    return promise
  }

  // A hit is one GET and one promise reaction: written with `then` rather than `async` so the
  // hot path allocates no extra promises (it is what the benchmark measures against the peers).
  #read<T>(key: string, loader: Loader<T>, opts: ResolvedEntryOptions): Promise<T> {
    const deadline = Date.now() + opts.hardTimeoutMs
    const prefix = this.#c.options.prefix
    const mark = this.#c.l1Mark()
    return this.#c.client.read(valueKey(prefix, key)).then(
      (raw) => {
        const found = raw === null ? undefined : this.#c.codec.decode<T>(key, raw)
        const now = Date.now()
        if (found !== undefined && found.expiresAt > now) {
          this.#inflight.delete(key)
          this.#c.l1Fill(key, found, mark)
          if (this.#c.events.has('hit')) this.#c.events.emit('hit', { key, tier: 'l2' })
          this.refreshEarly(key, loader, opts, found, now)
          return found.value as T
        }
        this.#c.events.emit('miss', { key })
        const stale = found !== undefined && now < found.staleUntil ? found : undefined
        const keys = entryKeys(prefix, key)
        return this.#done(key, this.#contend(key, keys, loader, opts, deadline, stale))
      },
      (err: unknown) =>
        this.#done(key, this.#degraded(key, entryKeys(prefix, key), loader, opts, 'read', err, undefined)),
    )
  }

  #done<T>(key: string, work: Promise<T>): Promise<T> {
    return work.finally(() => this.#inflight.delete(key))
  }

  /** Takes the lease and loads, or serves stale, or waits for whoever holds the lease. */
  async #contend<T>(
    key: string,
    keys: EntryKeys,
    loader: Loader<T>,
    opts: ResolvedEntryOptions,
    deadline: number,
    seenStale: Found<T> | undefined,
  ): Promise<T> {
    let waited = false
    for (;;) {
      this.#c.assertOpen()
      // Registered before the fetch, so a notification sent while it is in flight is not lost.
      const wake = this.#c.waiters.waitFor(key)
      const token = this.#token()
      const mark = this.#c.l1Mark()
      let reply: Awaited<ReturnType<typeof fetchOrLease>>
      try {
        reply = await fetchOrLease(this.#c.client, keys, token, this.#c.options.leaseTtlMs, '')
      } catch (err) {
        wake.cancel()
        return this.#degraded(key, keys, loader, opts, 'lease', err, seenStale)
      }
      const found = reply.raw === undefined ? undefined : this.#c.codec.decode<T>(key, reply.raw)
      if (reply.status === 'fresh' && found !== undefined) {
        wake.cancel()
        this.#c.l1Fill(key, found, mark)
        this.#c.events.emit(
          waited ? 'coalesced' : 'hit',
          waited ? { key, scope: 'fleet' } : { key, tier: 'l2' },
        )
        return found.value as T
      }
      const stale = found !== undefined && Date.now() < found.staleUntil ? found : undefined
      if (reply.status === 'leased') {
        wake.cancel()
        return this.#loadAsHolder({ key, keys, loader, opts, token, stale, deadline })
      }
      if (reply.status === 'fresh') {
        // Fresh but unreadable (foreign or corrupt): load and overwrite it without a lease.
        wake.cancel()
        return this.#loadAsHolder({ key, keys, loader, opts, token: '', deadline })
      }
      if (stale !== undefined) {
        wake.cancel()
        this.#c.events.emit('stale', { key, reason: 'refreshing' })
        return stale.value as T
      }
      const left = deadline - Date.now()
      if (left <= 0) {
        wake.cancel()
        throw new CacheLoaderTimeoutError(key, opts.hardTimeoutMs, 'wait')
      }
      waited = true
      await sleepUnless(wake.promise, Math.min(left, this.#c.options.pollIntervalMs))
      wake.cancel()
    }
  }

  /** Runs the loader under our lease (or none, `token` ''), with the soft and hard timeouts. */
  async #loadAsHolder<T>(job: LoadJob<T>): Promise<T> {
    const { key, keys, loader, opts, token, stale, deadline, early = false, awaitWrite = true } = job
    const controller = new AbortController()
    const started = Date.now()
    const stopLease =
      token === ''
        ? () => {}
        : keepLease(this.#c.client, keys, token, this.#c.options.leaseTtlMs, opts.hardTimeoutMs, (error) =>
            this.#c.events.emit('error', {
              key,
              operation: 'lease',
              error: error ?? new Error('lease lost: a set/delete happened or the lease expired'),
            }),
          )
    const work = (async () => {
      try {
        let value: T | undefined
        try {
          value = await loader({ key, stale: stale?.value, signal: controller.signal })
        } catch (err) {
          this.#emitLoad(key, started, 'error', early)
          this.#release(key, keys, token)
          throw err
        }
        this.#emitLoad(key, started, value === undefined ? 'not-found' : 'value', early)
        const writing = this.write(key, keys, value, opts, Date.now() - started, token).catch(
          (err: unknown) => {
            this.#release(key, keys, token)
            // An unserialisable value is the caller's bug: it fails the call. Any other write
            // failure (OOM under noeviction, Redis down) is reported and the loaded value is
            // still returned: a cache that cannot write degrades to calling the loader.
            if (err instanceof CacheSerializeError && awaitWrite) throw err
            this.#c.events.emit('error', { key, operation: 'write', error: asError(err) })
          },
        )
        // Degraded (Redis failing): the caller does not wait for the write as well.
        if (awaitWrite) await writing
        else void writing
        return value as T
      } finally {
        stopLease()
      }
    })()
    const softMs = stale === undefined ? Number.POSITIVE_INFINITY : opts.softTimeoutMs
    const outcome = await settleWithin(work, softMs, deadline, (late) => {
      if (late.kind === 'error')
        this.#c.events.emit('error', { key, operation: 'loader', error: asError(late.error) })
    })
    switch (outcome.kind) {
      case 'value':
        return outcome.value
      case 'soft':
        this.#c.events.emit('stale', { key, reason: 'soft-timeout' })
        return stale!.value as T
      case 'hard': {
        const error = new CacheLoaderTimeoutError(key, opts.hardTimeoutMs, 'load')
        controller.abort(error)
        throw error
      }
      case 'error': {
        if (outcome.error instanceof CacheSerializeError) throw outcome.error
        if (stale === undefined) throw new CacheLoaderError(key, { cause: outcome.error })
        this.#c.events.emit('error', { key, operation: 'loader', error: asError(outcome.error) })
        this.#c.events.emit('stale', { key, reason: 'loader-failed' })
        return stale.value as T
      }
    }
  }

  /** Redis failed mid-read: serve stale if we have it, else load without protection (failOpen). */
  async #degraded<T>(
    key: string,
    keys: EntryKeys,
    loader: Loader<T>,
    opts: ResolvedEntryOptions,
    operation: 'read' | 'lease',
    cause: unknown,
    stale: Found<T> | undefined,
  ): Promise<T> {
    if (!this.#c.options.failOpen)
      throw new CacheUnavailableError(key, operation === 'read' ? 'getOrSet' : 'lease', { cause })
    this.#c.events.emit('error', { key, operation, error: asError(cause) })
    if (stale !== undefined) {
      this.#c.events.emit('stale', { key, reason: 'unavailable' })
      return stale.value as T
    }
    // The write is attempted in the background (it reports its error): Redis is failing, and
    // the caller should not wait for it a second time.
    return this.#loadAsHolder({
      key,
      keys,
      loader,
      opts,
      token: '',
      deadline: Date.now() + opts.hardTimeoutMs,
      awaitWrite: false,
    })
  }

  refreshEarly<T>(
    key: string,
    loader: Loader<T>,
    opts: ResolvedEntryOptions,
    found: Found<T>,
    now = Date.now(),
  ): void {
    if (shouldRefreshEarly(now, found.expiresAt, found.deltaMs, opts.beta)) {
      this.startEarlyRefresh(key, loader, opts, found, now)
    }
  }

  /** Refreshes `key` ahead of its expiry; the XFetch draw said so (see `shouldRefreshEarly`). */
  startEarlyRefresh<T>(
    key: string,
    loader: Loader<T>,
    opts: ResolvedEntryOptions,
    found: Found<T>,
    now: number,
  ): void {
    if (this.#refreshing.has(key) || this.#c.isClosed()) return
    this.#refreshing.add(key)
    this.#c.events.emit('early-refresh', { key })
    const keys = entryKeys(this.#c.options.prefix, key)
    const token = this.#token()
    fetchOrLease(this.#c.client, keys, token, this.#c.options.leaseTtlMs, String(found.expiresAt))
      .then((reply) => {
        if (reply.status !== 'leased') return undefined
        return this.#loadAsHolder({
          key,
          keys,
          loader,
          opts,
          token,
          stale: found,
          deadline: now + opts.hardTimeoutMs,
          early: true,
        })
      })
      .catch((err: unknown) =>
        this.#c.events.emit('error', { key, operation: 'loader', error: asError(err) }),
      )
      .finally(() => this.#refreshing.delete(key))
  }

  /**
   * Encodes and writes under `token` ('' = unconditional). Throws `CacheSerializeError` before
   * any I/O; a refused write (the lease was taken from us) is not an error.
   */
  async write<T>(
    key: string,
    keys: EntryKeys,
    value: T | undefined,
    opts: ResolvedEntryOptions,
    deltaMs: number,
    token: string,
  ): Promise<void> {
    const encoded = this.#c.codec.encode(key, value, opts, deltaMs)
    if (encoded === undefined) return this.#release(key, keys, token)
    const mark = this.#c.l1Mark()
    const written = await writeEntry(
      this.#c.client,
      keys,
      encoded.raw,
      encoded.physicalMs,
      token,
      this.#c.channel,
      busMessage('k', this.#c.id, key),
    )
    if (written) this.#c.l1Fill(key, this.#c.codec.decode(key, encoded.raw)!, mark)
  }

  /** Gives the lease back in the background so a waiter can try at once instead of after its TTL. */
  #release(key: string, keys: EntryKeys, token: string): void {
    if (token === '') return
    releaseLease(this.#c.client, keys, token, this.#c.channel, busMessage('w', this.#c.id, key)).catch(
      (err: unknown) => this.#c.events.emit('error', { key, operation: 'release', error: asError(err) }),
    )
  }

  #token(): string {
    return this.#c.id + ':' + ++this.#tokens
  }

  #emitLoad(key: string, started: number, outcome: 'value' | 'not-found' | 'error', early: boolean): void {
    if (this.#c.events.has('load')) {
      this.#c.events.emit('load', { key, durationMs: Date.now() - started, outcome, early })
    }
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}
