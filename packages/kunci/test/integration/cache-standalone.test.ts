import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { Cache } from '../../src/cache/cache.js'
import { entryKeys } from '../../src/cache/cache-keys.js'
import { CacheSerializeError, InvalidOptionError, KunciError } from '../../src/errors.js'
import { runStorm } from '../fixtures/cache-spawn.js'
import { collect, sleep, standaloneCacheSuite, uniquePrefix } from '../fixtures/cache-test-kit.js'

// Values, validation and cross-process stampede protection on one standalone Redis; grace,
// timeouts, L1 and memory pressure are in cache-standalone-faults.test.ts.
const NODES = 1

const suite = standaloneCacheSuite(NODES)
const { newCache } = suite

describe('Cache on a standalone Redis: values', () => {
  it('keeps a cached null apart from absent, and caches "not found" (undefined) for negativeTtlMs', async () => {
    const cache = newCache({ prefix: uniquePrefix('null') })
    let calls = 0
    const counting =
      <T>(value: T) =>
      () => {
        calls++
        return value
      }
    expect(await cache.getOrSet({ key: 'n', loader: counting(null) })).toBeNull()
    expect(await cache.get('n')).toBeNull()
    expect(await cache.getOrSet({ key: 'n', loader: counting('other') })).toBeNull()
    expect(calls).toBe(1)
    expect(await cache.get('never-written')).toBeUndefined()

    expect(
      await cache.getOrSet({ key: 'u', loader: counting(undefined), negativeTtlMs: 300 }),
    ).toBeUndefined()
    expect(await cache.getOrSet({ key: 'u', loader: counting('late') })).toBeUndefined()
    expect(calls).toBe(2)
    await sleep(400)
    expect(await cache.getOrSet({ key: 'u', loader: counting('late') })).toBe('late')
    expect(calls).toBe(3)
  })

  it('round-trips set/get/delete and survives SCRIPT FLUSH', async () => {
    const cache = newCache({ prefix: uniquePrefix('crud') })
    await cache.set({ key: 'a', value: { x: [1, 'two', null] } })
    expect(await cache.get('a')).toEqual({ x: [1, 'two', null] })
    await suite.client.script('FLUSH')
    expect(await cache.delete('a')).toBe(true)
    expect(await cache.delete('a')).toBe(false)
    expect(await cache.get('a')).toBeUndefined()
    await suite.client.script('FLUSH')
    expect(await cache.getOrSet({ key: 'a', loader: () => 7 })).toBe(7)
  })

  it('uses a pluggable serializer (here one that keeps BigInt)', async () => {
    const bigintJson = {
      serialize: (v: unknown) =>
        JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? { $bigint: x.toString() } : x)),
      deserialize: (t: string) =>
        JSON.parse(t, (_k, x) =>
          x !== null && typeof x === 'object' && '$bigint' in x ? BigInt(x.$bigint) : x,
        ),
    }
    const prefix = uniquePrefix('serializer')
    const cache = newCache({ prefix, serializer: bigintJson })
    await cache.set({ key: 'k', value: { n: 2n ** 70n } })
    expect(await cache.get('k')).toEqual({ n: 2n ** 70n })
    expect(await suite.client.get(entryKeys(prefix, 'k').value)).toContain('$bigint')
  })

  it('rejects bad input at once with a typed error and a code', async () => {
    const cache = newCache({ prefix: uniquePrefix('bad') })
    const loader = () => 1
    const circular: Record<string, unknown> = {}
    circular.self = circular
    const bad: [() => Promise<unknown>, string][] = [
      [() => cache.getOrSet({ key: '', loader }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader, ttlMs: 0 }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader, ttlMs: -5 }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader, ttlMs: 1.5 }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader, graceMs: -1 }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader, jitter: 1 }), 'E_INVALID_OPTION'],
      [() => cache.getOrSet({ key: 'k', loader: 'nope' as never }), 'E_INVALID_OPTION'],
      [() => cache.set({ key: 'k', value: undefined }), 'E_INVALID_OPTION'],
      [() => cache.set({ key: 'k', value: 10n }), 'E_CACHE_SERIALIZE'],
      [() => cache.set({ key: 'k', value: circular }), 'E_CACHE_SERIALIZE'],
      [() => cache.getOrSet({ key: 'big', loader: () => ({ n: 1n }) }), 'E_CACHE_SERIALIZE'],
    ]
    for (const [call, code] of bad) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err).toBeInstanceOf(KunciError)
      expect((err as KunciError).code).toBe(code)
    }
    await expect(cache.set({ key: 'k', value: 1n })).rejects.toBeInstanceOf(CacheSerializeError)
    expect(() => new Cache({ client: suite.client, prefix: 'a{b}' })).toThrow(InvalidOptionError)
    expect(() => new Cache({ client: suite.client, leaseTtlMs: 0 })).toThrow(InvalidOptionError)
    // Nothing was written for the unserialisable loader result, and its lease was given back.
    expect(await cache.get('big')).toBeUndefined()
    expect(await cache.getOrSet({ key: 'big', loader: () => 'fine' })).toBe('fine')
  })
})

describe('Cache on a standalone Redis: stampede protection across OS processes', () => {
  it('4 processes × 250 concurrent getOrSet on one cold key run the loader exactly once', async () => {
    const n = suite.nodes.nodes[0]!
    const counterKey = uniquePrefix('count')
    const reports = await runStorm(4, {
      cluster: false,
      nodes: [{ host: n.host, port: n.port }],
      prefix: uniquePrefix('storm1'),
      keys: ['hot'],
      perKey: 250,
      counterKey,
      loaderMs: 100,
    })
    expect(reports.map((r) => r.errors)).toEqual([0, 0, 0, 0])
    expect(reports.reduce((s, r) => s + r.ok, 0)).toBe(1000)
    expect(await suite.client.hgetall(counterKey)).toEqual({ hot: '1' })
    // Every process got the value of that single load.
    const loaders = new Set(reports.flatMap((r) => r.loadedBy.hot!))
    expect(loaders.size).toBe(1)
  })

  it('4 processes × 200 distinct cold keys run the loader exactly once per key', async () => {
    const n = suite.nodes.nodes[0]!
    const counterKey = uniquePrefix('count')
    const keys = Array.from({ length: 200 }, (_, i) => `item:${i}`)
    const reports = await runStorm(4, {
      cluster: false,
      nodes: [{ host: n.host, port: n.port }],
      prefix: uniquePrefix('storm200'),
      keys,
      perKey: 5,
      counterKey,
      loaderMs: 50,
    })
    expect(reports.map((r) => r.errors)).toEqual([0, 0, 0, 0])
    const counts = await suite.client.hgetall(counterKey)
    expect(Object.keys(counts).sort()).toEqual([...keys].sort())
    expect(Object.values(counts).every((c) => c === '1')).toBe(true)
  })

  it('in one process, concurrent calls for a key share one promise before touching Redis', async () => {
    const cache = newCache({ prefix: uniquePrefix('sf') })
    const coalesced = collect(cache, 'coalesced')
    let calls = 0
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        cache.getOrSet({
          key: 'k',
          loader: async () => {
            await sleep(30)
            return ++calls
          },
        }),
      ),
    )
    expect(new Set(results)).toEqual(new Set([1]))
    expect(coalesced.filter((e) => e.scope === 'process')).toHaveLength(49)
  })

  it('hands the lease over when its holder dies: the waiter loads after the lease expires', async () => {
    const prefix = uniquePrefix('dead')
    const cache = newCache({ prefix, leaseTtlMs: 300 })
    // A holder that took the lease and then died: its token is nobody's and nothing renews it.
    await suite.client.set(entryKeys(prefix, 'k').lease, 'dead-holder', 'PX', 300)
    const started = Date.now()
    expect(await cache.getOrSet({ key: 'k', loader: () => 'mine' })).toBe('mine')
    const took = Date.now() - started
    expect(took).toBeGreaterThanOrEqual(200)
    expect(took).toBeLessThan(2000)
  })

  it('renews the lease while a loader runs longer than leaseTtlMs: a second instance waits, no second load', async () => {
    const prefix = uniquePrefix('renew')
    const otherClient = new Redis({ host: suite.nodes.nodes[0]!.host, port: suite.nodes.nodes[0]!.port })
    // Lease 600 ms, renewed every 200: a stall of this process (a and b both) up to ~400 ms
    // cannot let the lease lapse before its renewal (150 ms leases left 100 ms of margin).
    const a = newCache({ prefix, leaseTtlMs: 600 })
    const b = new Cache({ client: otherClient, prefix, leaseTtlMs: 600 })
    try {
      let calls = 0
      const loader = async () => {
        calls++
        await sleep(2_400) // four lease TTLs
        return calls
      }
      const first = a.getOrSet({ key: 'k', loader })
      await sleep(50)
      const second = b.getOrSet({ key: 'k', loader })
      expect(await Promise.all([first, second])).toEqual([1, 1])
      expect(calls).toBe(1)
    } finally {
      await b.close()
      otherClient.disconnect()
    }
  })

  it('fails with E_CLOSED after close(), also for a caller that was waiting', async () => {
    const prefix = uniquePrefix('closed')
    const cache = new Cache({ client: suite.client, prefix })
    await suite.client.set(entryKeys(prefix, 'k').lease, 'someone-else', 'PX', 5000)
    const waiting = cache.getOrSet({ key: 'k', loader: () => 1 }).catch((e: unknown) => e)
    await sleep(50)
    await cache.close()
    expect((await waiting) as KunciError).toMatchObject({ code: 'E_CLOSED' })
    await expect(cache.get('k')).rejects.toMatchObject({ code: 'E_CLOSED' })
    await expect(cache.getOrSet({ key: 'k', loader: () => 1 })).rejects.toMatchObject({ code: 'E_CLOSED' })
  })

  it('a delete during a load cancels its write: the caller gets the value, the cache stays empty', async () => {
    const cache = newCache({ prefix: uniquePrefix('cancel') })
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    const pending = cache.getOrSet({
      key: 'k',
      loader: async () => {
        await gate
        return 'read-before-delete'
      },
    })
    await sleep(50)
    await cache.delete('k')
    release()
    expect(await pending).toBe('read-before-delete')
    expect(await cache.get('k')).toBeUndefined()
  })
})
