import { describe, expect, it } from 'vitest'
import {
  DEFAULT_CACHE_OPTIONS,
  DEFAULT_ENTRY_OPTIONS,
  resolveCacheOptions,
  resolveEntryOptions,
} from '../../src/cache/cache-options.js'
import { InvalidOptionError } from '../../src/errors.js'

// resolveCacheOptions only checks that the client looks like ioredis; no connection is made.
const client = { evalsha: () => undefined } as never

function optionOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError)
    expect((err as InvalidOptionError).code).toBe('E_INVALID_OPTION')
    return (err as InvalidOptionError).option
  }
  return undefined
}

describe('cache options', () => {
  it('fills every default from the frozen tables', () => {
    const o = resolveCacheOptions({ client })
    expect(o.prefix).toBe(DEFAULT_CACHE_OPTIONS.prefix)
    expect(o.leaseTtlMs).toBe(5000)
    expect(o.l1MaxEntries).toBe(0)
    expect(o.entry).toEqual(DEFAULT_ENTRY_OPTIONS)
    expect(Object.isFrozen(DEFAULT_ENTRY_OPTIONS) && Object.isFrozen(DEFAULT_CACHE_OPTIONS)).toBe(true)
  })

  it('maps defaultTtlMs to the entries ttlMs and keeps the base object when a call overrides nothing', () => {
    const o = resolveCacheOptions({ client, defaultTtlMs: 1234, graceMs: 10 })
    expect(o.entry.ttlMs).toBe(1234)
    expect(o.entry.graceMs).toBe(10)
    expect(resolveEntryOptions({}, o.entry)).toBe(o.entry)
    expect(resolveEntryOptions({ ttlMs: 5 }, o.entry)).toEqual({ ...o.entry, ttlMs: 5 })
  })

  it('accepts Infinity for timeouts and 0 where 0 means off', () => {
    const e = resolveEntryOptions(
      {
        softTimeoutMs: 0,
        hardTimeoutMs: Number.POSITIVE_INFINITY,
        graceMs: 0,
        beta: 0,
        jitter: 0,
        negativeTtlMs: 0,
      },
      DEFAULT_ENTRY_OPTIONS,
    )
    expect(e.hardTimeoutMs).toBe(Number.POSITIVE_INFINITY)
    expect(e.softTimeoutMs).toBe(0)
  })

  it.each([
    [{ ttlMs: 0 }, 'ttlMs'],
    [{ ttlMs: -1 }, 'ttlMs'],
    [{ ttlMs: 2.5 }, 'ttlMs'],
    [{ ttlMs: Number.POSITIVE_INFINITY }, 'ttlMs'],
    [{ ttlMs: '100' }, 'ttlMs'],
    [{ graceMs: -1 }, 'graceMs'],
    [{ softTimeoutMs: -1 }, 'softTimeoutMs'],
    [{ hardTimeoutMs: 0 }, 'hardTimeoutMs'],
    [{ beta: -0.1 }, 'beta'],
    [{ beta: Number.NaN }, 'beta'],
    [{ jitter: 1 }, 'jitter'],
    [{ jitter: -0.1 }, 'jitter'],
    [{ negativeTtlMs: 1.5 }, 'negativeTtlMs'],
  ])('rejects entry option %o', (input, option) => {
    expect(optionOf(() => resolveEntryOptions(input as never, DEFAULT_ENTRY_OPTIONS))).toBe(option)
  })

  it.each([
    [{}, 'client'],
    [{ client: {} }, 'client'],
    [{ client, prefix: '' }, 'prefix'],
    [{ client, prefix: 'a{b' }, 'prefix'],
    [{ client, prefix: 'a}b' }, 'prefix'],
    [{ client, defaultTtlMs: 0 }, 'defaultTtlMs'],
    [{ client, serializer: { serialize: () => '' } }, 'serializer'],
    [{ client, l1MaxEntries: -1 }, 'l1MaxEntries'],
    [{ client, l1Serialize: 'yes' }, 'l1Serialize'],
    [{ client, leaseTtlMs: 10 }, 'leaseTtlMs'],
    [{ client, pollIntervalMs: 0 }, 'pollIntervalMs'],
    [{ client, busHeartbeatMs: -5 }, 'busHeartbeatMs'],
    [{ client, failOpen: 1 }, 'failOpen'],
  ])('rejects cache option %o', (input, option) => {
    expect(optionOf(() => resolveCacheOptions(input as never))).toBe(option)
  })
})
