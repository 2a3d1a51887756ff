/**
 * Options of `Cache` and of each `getOrSet`/`set` call. Every default sits in the two frozen
 * tables below; per-call overrides go through the same resolver as the constructor's values.
 */
import { InvalidOptionError } from '../errors.js'
import { boolean, integer, MAX_MS, milliseconds, number, object, string } from '../options.js'
import { type KunciClient, toRedisPort } from '../redis/client.js'
import type { RedisPort } from '../redis/port.js'
import type { Serializer } from './serializer.js'
import { jsonSerializer } from './serializer.js'

/** Options that may be given per entry (`getOrSet`, `set`) and whose defaults the constructor sets. */
export interface EntryOptions {
  /**
   * How long a value is fresh, in ms. Must be a positive integer.
   * @defaultValue 60000
   */
  ttlMs?: number
  /**
   * How long after `ttlMs` an expired value may still be served (stale-while-revalidate, loader
   * failure, soft timeout). Redis deletes the entry at `ttlMs + graceMs`, so nothing older is
   * ever served. 0 disables stale serving.
   * @defaultValue 0
   */
  graceMs?: number
  /**
   * With a stale value at hand, return it if the loader has not finished after this many ms
   * (the loader keeps running and writes its result). Infinity waits for the loader; a value
   * above `hardTimeoutMs` never fires.
   * @defaultValue Infinity
   */
  softTimeoutMs?: number
  /**
   * Fail with `CacheLoaderTimeoutError` (E_CACHE_LOADER_TIMEOUT) when no value is ready after
   * this many ms, whether our loader runs or another process's does. Infinity waits forever.
   * @defaultValue 10000
   */
  hardTimeoutMs?: number
  /**
   * XFetch β: higher refreshes earlier. 0 turns probabilistic early refresh off.
   * @defaultValue 1
   */
  beta?: number
  /**
   * TTL jitter: each write shortens `ttlMs` by a random fraction in `[0, jitter)`, so keys
   * written together do not expire together. From 0 (off) to below 1.
   * @defaultValue 0
   */
  jitter?: number
  /**
   * How long a "not found" (the loader returned `undefined`) is cached, in ms. 0 caches nothing.
   * @defaultValue 10000
   */
  negativeTtlMs?: number
}

/** Constructor options. The entry options set here are the defaults of every call. */
export interface CacheOptions extends Omit<EntryOptions, 'ttlMs'> {
  /**
   * A connected or lazy ioredis `Redis` or `Cluster`, or a connected node-redis v5 client or
   * cluster (docs/cache.md "Clients"). Never closed by the cache.
   */
  client: KunciClient
  /**
   * `ttlMs` of calls that do not give one.
   * @defaultValue 60000
   */
  defaultTtlMs?: number
  /**
   * Namespace of every key and of the bus channel. No braces: the cache builds its own hash tag.
   * @defaultValue 'kunci:cache'
   */
  prefix?: string
  /** @defaultValue jsonSerializer */
  serializer?: Serializer
  /**
   * Maximum entries of the in-process L1 tier (LRU). 0 disables it.
   * @defaultValue 0
   */
  l1MaxEntries?: number
  /**
   * L1 keeps the serialised text and deserialises on every hit, so callers never share (and
   * mutate) one object. `false` keeps the object itself: faster, but do not mutate what you get.
   * @defaultValue true
   */
  l1Serialize?: boolean
  /**
   * Lease (the right to run the loader for a key) time-to-live, ms. The holder renews it every
   * third of it while its loader runs, so it only matters when the holder dies or is cut off:
   * then another process may load after this long.
   * @defaultValue 5000
   */
  leaseTtlMs?: number
  /**
   * Waiters re-check Redis at least this often, in case a notification is lost.
   * @defaultValue 100
   */
  pollIntervalMs?: number
  /**
   * The bus subscriber is pinged this often; no answer within the same time counts as a drop
   * (L1 is flushed and bypassed until the subscription is back).
   * @defaultValue 2000
   */
  busHeartbeatMs?: number
  /**
   * When Redis fails during `getOrSet`, call the loader anyway (still single-flight in this
   * process) and report the error through events, instead of failing with E_CACHE_UNAVAILABLE.
   * @defaultValue true
   */
  failOpen?: boolean
}

export const DEFAULT_ENTRY_OPTIONS = Object.freeze({
  ttlMs: 60_000,
  graceMs: 0,
  softTimeoutMs: Number.POSITIVE_INFINITY,
  hardTimeoutMs: 10_000,
  beta: 1,
  jitter: 0,
  negativeTtlMs: 10_000,
} satisfies Required<EntryOptions>)

export const DEFAULT_CACHE_OPTIONS = Object.freeze({
  prefix: 'kunci:cache',
  serializer: jsonSerializer,
  l1MaxEntries: 0,
  l1Serialize: true,
  leaseTtlMs: 5_000,
  pollIntervalMs: 100,
  busHeartbeatMs: 2_000,
  failOpen: true,
} satisfies Required<Omit<CacheOptions, 'client' | 'defaultTtlMs' | keyof EntryOptions>>)

export type ResolvedEntryOptions = Readonly<Required<EntryOptions>>

export interface ResolvedCacheOptions {
  /** The user's client, behind the port (redis/port.ts). */
  readonly client: RedisPort
  readonly prefix: string
  readonly serializer: Serializer
  readonly l1MaxEntries: number
  readonly l1Serialize: boolean
  readonly leaseTtlMs: number
  readonly pollIntervalMs: number
  readonly busHeartbeatMs: number
  readonly failOpen: boolean
  readonly entry: ResolvedEntryOptions
}

const positiveInt = (name: string, v: unknown) => milliseconds(name, v, { min: 1 })
const nonNegativeInt = (name: string, v: unknown) => milliseconds(name, v)
const timeout = (name: string, v: unknown, min: number) =>
  milliseconds(name, v, { min, infinity: true, hint: 'Infinity waits without limit' })

/**
 * Merges per-entry options over `base` and range-checks what was given. Returns `base` itself
 * when nothing is overridden, so the hot path allocates nothing.
 */
export function resolveEntryOptions(input: EntryOptions, base: ResolvedEntryOptions): ResolvedEntryOptions {
  const { ttlMs, graceMs, softTimeoutMs, hardTimeoutMs, beta, jitter, negativeTtlMs } = input
  if (
    ttlMs === undefined &&
    graceMs === undefined &&
    softTimeoutMs === undefined &&
    hardTimeoutMs === undefined &&
    beta === undefined &&
    jitter === undefined &&
    negativeTtlMs === undefined
  ) {
    return base
  }
  const out = {
    ttlMs: ttlMs === undefined ? base.ttlMs : positiveInt('ttlMs', ttlMs),
    graceMs: graceMs === undefined ? base.graceMs : nonNegativeInt('graceMs', graceMs),
    softTimeoutMs:
      softTimeoutMs === undefined ? base.softTimeoutMs : timeout('softTimeoutMs', softTimeoutMs, 0),
    hardTimeoutMs:
      hardTimeoutMs === undefined ? base.hardTimeoutMs : timeout('hardTimeoutMs', hardTimeoutMs, 1),
    beta: base.beta,
    jitter: base.jitter,
    negativeTtlMs:
      negativeTtlMs === undefined ? base.negativeTtlMs : nonNegativeInt('negativeTtlMs', negativeTtlMs),
  }
  if (beta !== undefined) out.beta = number('beta', beta, { min: 0, hint: '0 disables early refresh' })
  if (jitter !== undefined)
    out.jitter = number('jitter', jitter, { min: 0, below: 1, hint: 'a fraction, 0 is off' })
  if (out.ttlMs + out.graceMs > MAX_MS) {
    throw new InvalidOptionError('graceMs', 'ttlMs + graceMs is too large; keep it below 2^51 ms.')
  }
  return Object.freeze(out)
}

/** Resolves the constructor's options once; throws `InvalidOptionError` on the first bad value. */
export function resolveCacheOptions(input: CacheOptions): ResolvedCacheOptions {
  object('options', input, 'an options object: new Cache({ client })')
  const client = toRedisPort(input.client, 'client')
  const d = DEFAULT_CACHE_OPTIONS
  const prefix = string('prefix', input.prefix ?? d.prefix, {
    nonEmpty: true,
    forbidden: /[{}]/,
    hint: 'without "{" or "}" (the cache builds its own hash tag)',
  })
  const serializer = input.serializer ?? d.serializer
  if (
    serializer === null ||
    typeof serializer !== 'object' ||
    typeof serializer.serialize !== 'function' ||
    typeof serializer.deserialize !== 'function'
  ) {
    throw new InvalidOptionError(
      'serializer',
      'must be an object with serialize(value) and deserialize(text).',
    )
  }
  const l1MaxEntries = integer('l1MaxEntries', input.l1MaxEntries ?? d.l1MaxEntries, {
    min: 0,
    hint: '0 disables L1',
  })
  const l1Serialize = boolean('l1Serialize', input.l1Serialize ?? d.l1Serialize)
  const failOpen = boolean('failOpen', input.failOpen ?? d.failOpen)
  const leaseTtlMs = positiveInt('leaseTtlMs', input.leaseTtlMs ?? d.leaseTtlMs)
  if (leaseTtlMs < 30) {
    throw new InvalidOptionError(
      'leaseTtlMs',
      `must be at least 30 ms so the holder can renew it, got ${leaseTtlMs}.`,
    )
  }
  return {
    client,
    prefix,
    serializer,
    l1MaxEntries,
    l1Serialize,
    leaseTtlMs,
    pollIntervalMs: positiveInt('pollIntervalMs', input.pollIntervalMs ?? d.pollIntervalMs),
    busHeartbeatMs: positiveInt('busHeartbeatMs', input.busHeartbeatMs ?? d.busHeartbeatMs),
    failOpen,
    entry: resolveEntryOptions(
      {
        ttlMs: input.defaultTtlMs === undefined ? undefined : positiveInt('defaultTtlMs', input.defaultTtlMs),
        graceMs: input.graceMs,
        softTimeoutMs: input.softTimeoutMs,
        hardTimeoutMs: input.hardTimeoutMs,
        beta: input.beta,
        jitter: input.jitter,
        negativeTtlMs: input.negativeTtlMs,
      },
      DEFAULT_ENTRY_OPTIONS,
    ),
  }
}
