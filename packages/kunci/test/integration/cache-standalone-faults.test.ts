import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { lineReader } from '@kunci/topology'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { Cache } from '../../src/cache/cache.js'
import { entryKeys } from '../../src/cache/cache-keys.js'
import { encodeEntry } from '../../src/cache/serializer.js'
import { CacheLoaderError, CacheLoaderTimeoutError, type KunciError } from '../../src/errors.js'
import { isOomError } from '../../src/redis/reply-error.js'
import {
  collect,
  killClientNamed,
  sleep,
  standaloneCacheSuite,
  uniquePrefix,
  until,
} from '../fixtures/cache-test-kit.js'

// Grace, loader failures, timeouts, early refresh, L1 + bus, invalidatePrefix and noeviction OOM
// on standalone Redis (the second node is the one put under memory pressure).
const NODES = 2

const suite = standaloneCacheSuite(NODES)
const { newCache } = suite

describe('Cache on a standalone Redis: grace, failures, timeouts, early refresh', () => {
  it('serves stale and reports the error when the loader fails; without stale the error reaches the caller', async () => {
    const cache = newCache({ prefix: uniquePrefix('fail'), graceMs: 2000 })
    const errors = collect(cache, 'error')
    const stale = collect(cache, 'stale')
    await cache.getOrSet({ key: 'k', loader: () => 'v1', ttlMs: 100 })
    await sleep(150)
    const boom = new Error('database down')
    expect(await cache.getOrSet({ key: 'k', loader: () => Promise.reject(boom) })).toBe('v1')
    expect(errors.some((e) => e.operation === 'loader' && e.error === boom)).toBe(true)
    expect(stale.map((s) => s.reason)).toContain('loader-failed')

    const err = await cache
      .getOrSet({ key: 'cold', loader: () => Promise.reject(boom) })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CacheLoaderError)
    expect((err as CacheLoaderError).code).toBe('E_CACHE_LOADER_FAILED')
    expect((err as CacheLoaderError).cause).toBe(boom)
    // The failed load gave its lease back: the next call loads at once.
    expect(await cache.getOrSet({ key: 'cold', loader: () => 'ok', hardTimeoutMs: 500 })).toBe('ok')
  })

  it('never serves a value older than ttl + grace', async () => {
    // Grace 1 s: the stale read below has ~850 ms of margin before the entry's end (it had 150 ms
    // with a 200 ms grace, which a stall of this process could use up).
    const cache = newCache({ prefix: uniquePrefix('age'), graceMs: 1_000 })
    await cache.getOrSet({ key: 'k', loader: () => 'old', ttlMs: 100 })
    await sleep(150) // stale, within grace
    expect(await cache.getOrSet({ key: 'k', loader: () => Promise.reject(new Error('x')) })).toBe('old')
    await sleep(1_000) // past ttl + grace
    const err = await cache
      .getOrSet({ key: 'k', loader: () => Promise.reject(new Error('x')) })
      .catch((e) => e)
    expect(err).toBeInstanceOf(CacheLoaderError)
  })

  it('soft timeout serves stale while the loader finishes in the background; hard timeout fails typed', async () => {
    const cache = newCache({ prefix: uniquePrefix('timeouts'), graceMs: 5000 })
    await cache.getOrSet({ key: 'k', loader: () => 'v1', ttlMs: 50 })
    await sleep(80)
    const t0 = Date.now()
    const v = await cache.getOrSet({
      key: 'k',
      loader: async () => {
        await sleep(300)
        return 'v2'
      },
      softTimeoutMs: 50,
    })
    expect(v).toBe('v1')
    expect(Date.now() - t0).toBeLessThan(250)
    await until(async () => (await cache.get('k')) === 'v2', 'background load written')

    let aborted = false
    const err = await cache
      .getOrSet({
        key: 'slow',
        hardTimeoutMs: 100,
        loader: ({ signal }) =>
          new Promise((resolve) => {
            signal.addEventListener('abort', () => (aborted = true))
            setTimeout(() => resolve('late'), 400)
          }),
      })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CacheLoaderTimeoutError)
    expect((err as CacheLoaderTimeoutError).code).toBe('E_CACHE_LOADER_TIMEOUT')
    expect((err as CacheLoaderTimeoutError).phase).toBe('load')
    expect(aborted).toBe(true)
  })

  it('a waiter gives up with E_CACHE_LOADER_TIMEOUT (phase wait) when another holder takes too long', async () => {
    const prefix = uniquePrefix('waittimeout')
    const cache = newCache({ prefix })
    await suite.client.set(entryKeys(prefix, 'k').lease, 'someone-else', 'PX', 5000)
    const err = await cache
      .getOrSet({ key: 'k', loader: () => 1, hardTimeoutMs: 200 })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(CacheLoaderTimeoutError)
    expect((err as CacheLoaderTimeoutError).phase).toBe('wait')
  })

  it('refreshes a key before it expires under steady load (XFetch)', async () => {
    const cache = newCache({ prefix: uniquePrefix('xfetch') })
    const loads = collect(cache, 'load')
    const misses = collect(cache, 'miss')
    let version = 0
    const loader = async () => {
      await sleep(80)
      return ++version
    }
    await cache.getOrSet({ key: 'k', loader, ttlMs: 600, beta: 2 })
    const seen: number[] = []
    const end = Date.now() + 1800
    while (Date.now() < end) {
      seen.push(await cache.getOrSet({ key: 'k', loader, ttlMs: 600, beta: 2 }))
      await sleep(5)
    }
    // Only the very first read missed: the value was always replaced before it expired.
    expect(misses).toHaveLength(1)
    expect(loads.filter((l) => l.early).length).toBeGreaterThanOrEqual(2)
    expect(version).toBeGreaterThanOrEqual(3)
    expect(seen.at(-1)).toBeGreaterThan(1)
  })
})

describe('Cache on a standalone Redis: L1 and the bus', () => {
  it('invalidates L1 in another OS process after set and delete', async () => {
    const prefix = uniquePrefix('l1')
    const n = suite.nodes.nodes[0]!
    const peer = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('../fixtures/cache-peer.ts', import.meta.url)),
        JSON.stringify({ cluster: false, nodes: [{ host: n.host, port: n.port }], prefix }),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    )
    try {
      const next = lineReader(peer)
      const ask = async (cmd: object) => {
        peer.stdin!.write(JSON.stringify(cmd) + '\n')
        return JSON.parse(await next())
      }
      const { id } = JSON.parse(await next()) as { id: string }
      await until(async () => (await ask({ op: 'busUp' })).up === true, 'peer bus up')
      const cache = newCache({ prefix, l1MaxEntries: 100 })
      await until(() => cache.busConnected, 'own bus up')

      await cache.set({ key: 'k', value: 'v1' })
      // The peer's first read may race the bus message of our own set and (rightly) not fill
      // L1; within a few reads it must be served from L1.
      const servedFromL1 = (value: string) =>
        until(async () => {
          const r = await ask({ op: 'get', key: 'k' })
          expect(r.value).toBe(value)
          return r.tier === 'l1'
        }, `peer serves ${value} from L1`)
      expect(await ask({ op: 'get', key: 'k' })).toMatchObject({ value: 'v1', tier: 'l2' })
      await servedFromL1('v1')

      await cache.set({ key: 'k', value: 'v2' })
      await until(async () => (await ask({ op: 'get', key: 'k' })).value === 'v2', 'peer sees v2', 2000)

      await cache.delete('k')
      await until(
        async () => (await ask({ op: 'get', key: 'k' })).absent === true,
        'peer sees the delete',
        2000,
      )

      // A dropped bus flushes L1: fill the peer's L1, change Redis behind the bus's back (no
      // PUBLISH), cut the peer's subscriber connection, and the peer must stop serving v3.
      await cache.set({ key: 'k', value: 'v3' })
      await servedFromL1('v3')
      const keys = entryKeys(prefix, 'k')
      await suite.client.set(keys.value, encodeEntry('v', Date.now() + 60_000, 0, 0, '"v4"'), 'PX', 60_000)
      expect(await ask({ op: 'get', key: 'k' })).toMatchObject({ value: 'v3', tier: 'l1' })
      expect(await killClientNamed(suite.client, `kunci-cache-bus-${id}`)).toBe(1)
      await until(async () => {
        const r = await ask({ op: 'get', key: 'k' })
        return r.value === 'v4'
      }, 'peer stops serving the stale L1 entry')
      await until(async () => (await ask({ op: 'busUp' })).up === true, 'peer bus back up')
      expect(await ask({ op: 'get', key: 'k' })).toMatchObject({ value: 'v4' })
      peer.stdin!.end()
    } finally {
      if (peer.exitCode === null) peer.kill('SIGKILL')
    }
  })
})

describe('Cache on a standalone Redis: invalidatePrefix and memory pressure', () => {
  it('invalidatePrefix removes matching entries only, with SCAN and never KEYS', async () => {
    const prefix = uniquePrefix('inv')
    const cache = newCache({ prefix })
    const other = newCache({ prefix: `${prefix}-other` })
    const keys = ['user:1', 'user:2', 'user:*odd[1]?', 'users', 'user', 'order:1']
    for (const key of keys) await cache.set({ key, value: key })
    await other.set({ key: 'user:1', value: 'other cache' })
    await suite.client.config('RESETSTAT')
    const deleted = await cache.invalidatePrefix('user:')
    expect(deleted).toBe(3)
    for (const key of keys) expect(await cache.get(key)).toBe(key.startsWith('user:') ? undefined : key)
    expect(await other.get('user:1')).toBe('other cache')
    const stats = (await suite.client.info('commandstats')) as string
    expect(stats).toMatch(/cmdstat_scan:calls=[1-9]/)
    expect(stats).not.toMatch(/cmdstat_keys:/)
  })

  it('under maxmemory + noeviction, hits still work and a loaded value is returned while the write error is reported', async () => {
    const n = suite.nodes.nodes[1]!
    const oomClient = new Redis({ host: n.host, port: n.port })
    const cache = new Cache({ client: oomClient, prefix: uniquePrefix('oom') })
    try {
      const errors = collect(cache, 'error')
      await cache.set({ key: 'hot', value: 'kept' })
      await oomClient.config('SET', 'maxmemory-policy', 'noeviction')
      await oomClient.config('SET', 'maxmemory', '1') // every write is now refused with OOM
      expect(await cache.getOrSet({ key: 'hot', loader: () => 'reloaded' })).toBe('kept')
      let calls = 0
      const loader = () => {
        calls++
        return { fresh: true }
      }
      expect(await cache.getOrSet({ key: 'new', loader })).toEqual({ fresh: true })
      expect(calls).toBe(1)
      await until(() => errors.some((e) => e.operation === 'write'), 'write error reported')
      const writeError = errors.find((e) => e.operation === 'write')!
      expect(isOomError(writeError.error)).toBe(true)
      const strict = new Cache({ client: oomClient, prefix: uniquePrefix('oom-strict'), failOpen: false })
      const strictErr = await strict.getOrSet({ key: 'new', loader }).catch((e: unknown) => e)
      await strict.close()
      expect((strictErr as KunciError).code).toBe('E_CACHE_UNAVAILABLE')
      expect(isOomError((strictErr as Error).cause)).toBe(true)
      expect(calls).toBe(1)
      const setErr = await cache.set({ key: 'x', value: 1 }).catch((e: unknown) => e)
      expect((setErr as KunciError).code).toBe('E_CACHE_UNAVAILABLE')
      expect(isOomError((setErr as Error).cause)).toBe(true)
    } finally {
      await oomClient.config('SET', 'maxmemory', '0')
      await cache.close()
      oomClient.disconnect()
    }
  })
})
