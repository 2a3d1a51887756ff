/**
 * The hit path on a Cluster (value-reader.ts): GETs go straight to the master that owns each
 * key's slot, the GETs of one tick leave in one write per master, and anything unexpected
 * (MOVED after a resharding, a closed connection) is sent again through the Cluster client.
 * Run with and without ioredis' auto-pipelining, which changes how the rest of a tick travels.
 */
import { type RedisCluster, type RedisNode, startCluster } from '@kunci/topology'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cache } from '../../src/cache/cache.js'
import { entryKeys, valueKey } from '../../src/cache/cache-keys.js'
import { fetchOrLease } from '../../src/cache/stampede.js'
import { keySlot } from '../../src/cluster/slot.js'
import { toRedisPort } from '../../src/redis/client.js'
import { collect, uniquePrefix, until } from '../fixtures/cache-test-kit.js'

const PASSWORD = 'cache-reads-secret'
let cluster: RedisCluster
const clients: Cluster[] = []
const caches: Cache[] = []

/** slotsRefreshInterval 0: the client learns of a moved slot only from a MOVED reply. */
function newClient(autoPipelining: boolean): Cluster {
  const client = new Cluster(cluster.startupNodes, {
    enableAutoPipelining: autoPipelining,
    slotsRefreshInterval: 0,
    redisOptions: { password: PASSWORD },
  })
  clients.push(client)
  return client
}

function newCache(options: ConstructorParameters<typeof Cache>[0]): Cache {
  const cache = new Cache(options)
  caches.push(cache)
  return cache
}

/** Counts the GETs that go through the Cluster client itself (the fallback path). */
function countRoutedGets(client: Cluster): { count: number; keys: string[]; restore(): void } {
  const original = client.get
  const counter = {
    count: 0,
    keys: [] as string[],
    restore: () => {
      client.get = original
    },
  }
  client.get = ((...args: Parameters<Cluster['get']>) => {
    counter.count++
    counter.keys.push(String(args[0]))
    return original.apply(client, args)
  }) as Cluster['get']
  return counter
}

/** MOVED replies a node has sent so far (INFO errorstats). */
async function movedReplies(node: RedisNode): Promise<number> {
  const admin = new Redis({ host: node.host, port: node.port, password: PASSWORD })
  try {
    const info = await admin.info('errorstats')
    return Number(/errorstat_MOVED:count=(\d+)/.exec(info)?.[1] ?? 0)
  } finally {
    admin.disconnect()
  }
}

const mustNotLoad = ({ key }: { key: string }): never => {
  throw new Error(`the loader ran for ${key}, which was cached`)
}

beforeAll(async () => {
  cluster = await startCluster({ password: PASSWORD })
})

afterAll(async () => {
  await Promise.all(caches.map((c) => c.close()))
  for (const c of clients) c.disconnect()
  await cluster?.stop()
})

describe.each([
  ['without auto-pipelining', false],
  ['with auto-pipelining', true],
])('Cache hits on a cluster, %s', (_name, autoPipelining) => {
  it('one tick of 300 hits over every master: each caller gets its own value, straight from the master', async () => {
    const client = newClient(autoPipelining)
    const prefix = uniquePrefix('tick')
    const cache = newCache({ client, prefix, defaultTtlMs: 60_000 })
    const keys = Array.from({ length: 300 }, (_, i) => `k:${i}`)
    for (const [i, key] of keys.entries()) await cache.set({ key, value: { key, i } })
    const owners = new Set<string>()
    for (const key of keys) owners.add((await cluster.slotOwner(keySlot(valueKey(prefix, key)))).name)
    expect(owners.size).toBe(3)

    const routed = countRoutedGets(client)
    try {
      const values = await Promise.all(keys.map((key) => cache.getOrSet({ key, loader: mustNotLoad })))
      expect(values).toEqual(keys.map((key, i) => ({ key, i })))
      // Every master's connection was ready (the writes above used them): no GET took the
      // Cluster client's own path.
      expect(routed.count).toBe(0)
    } finally {
      routed.restore()
    }
  })

  it('a tick mixing hits, misses, a stale entry under a foreign lease and a waiter, across slots', async () => {
    const client = newClient(autoPipelining)
    const prefix = uniquePrefix('mixed')
    const cache = newCache({ client, prefix, defaultTtlMs: 60_000, pollIntervalMs: 50 })
    const writer = newCache({ client, prefix, defaultTtlMs: 60_000 })
    const hits = Array.from({ length: 40 }, (_, i) => `hit:${i}`)
    const misses = Array.from({ length: 40 }, (_, i) => `miss:${i}`)
    for (const key of hits) await cache.set({ key, value: `cached ${key}` })
    // Expired but within grace, and another process holds the lease to refresh it.
    await cache.set({ key: 'stale', value: 'old', ttlMs: 1, graceMs: 60_000 })
    await until(async () => (await cache.get('stale')) === undefined, 'the entry to expire')
    expect(
      (await fetchOrLease(toRedisPort(client, 'client'), entryKeys(prefix, 'stale'), 'foreign:1', 30_000, ''))
        .status,
    ).toBe('leased')
    // Absent, and another process holds the lease: the caller waits for that process's write.
    expect(
      (
        await fetchOrLease(
          toRedisPort(client, 'client'),
          entryKeys(prefix, 'awaited'),
          'foreign:2',
          30_000,
          '',
        )
      ).status,
    ).toBe('leased')
    const stale = collect(cache, 'stale')
    const errors = collect(cache, 'error')
    const loads = new Map<string, number>()
    const loader = async ({ key }: { key: string }) => {
      loads.set(key, (loads.get(key) ?? 0) + 1)
      if (!key.startsWith('miss:')) throw new Error(`the loader ran for ${key}`)
      return `loaded ${key}`
    }

    const tick = Promise.all([
      ...hits.map((key) => cache.getOrSet({ key, loader })),
      ...misses.map((key) => cache.getOrSet({ key, loader })),
      cache.getOrSet({ key: 'stale', loader }),
      cache.getOrSet({ key: 'awaited', loader }),
    ])
    const written = writer.set({ key: 'awaited', value: 'written elsewhere' })
    const values = await tick
    await written

    expect(values).toEqual([
      ...hits.map((key) => `cached ${key}`),
      ...misses.map((key) => `loaded ${key}`),
      'old',
      'written elsewhere',
    ])
    expect([...loads.keys()].sort()).toEqual([...misses].sort())
    expect([...loads.values()].every((n) => n === 1)).toBe(true)
    expect(stale).toEqual([{ key: 'stale', reason: 'refreshing' }])
    // Nothing fell back to loading without protection: with auto-pipelining, the lease calls of
    // one tick on three masters once failed as one refused pipeline (redis/lua-script.ts).
    expect(errors).toEqual([])
  })

  it('follows a slot moved to another master: MOVED replies are sent again through the cluster client', async () => {
    const client = newClient(autoPipelining)
    const prefix = uniquePrefix('moved')
    const cache = newCache({ client, prefix, defaultTtlMs: 60_000 })
    const keys = Array.from({ length: 30 }, (_, i) => `k:${i}`)
    for (const key of keys) await cache.set({ key, value: key })
    const slot = keySlot(valueKey(prefix, keys[0]!))
    const owner = await cluster.slotOwner(slot)
    const target = (await cluster.masters()).find((m) => m.name !== owner.name)!
    expect(await Promise.all(keys.map((key) => cache.getOrSet({ key, loader: mustNotLoad })))).toEqual(keys)

    // The client does not know yet (no periodic slot refresh): its GET goes to the old owner.
    await cluster.migrateSlot(slot, target)
    const movedBefore = await movedReplies(owner)
    const routed = countRoutedGets(client)
    try {
      expect(await Promise.all(keys.map((key) => cache.getOrSet({ key, loader: mustNotLoad })))).toEqual(keys)
      expect(await movedReplies(owner)).toBeGreaterThan(movedBefore)
      expect(routed.count).toBeGreaterThanOrEqual(1)

      // The fallback taught the client the new owner: the next tick goes straight there.
      const movedAfter = await movedReplies(owner)
      const routedAfter = routed.count
      expect(await Promise.all(keys.map((key) => cache.getOrSet({ key, loader: mustNotLoad })))).toEqual(keys)
      expect(await movedReplies(owner)).toBe(movedAfter)
      // Once failed beside a CPU hog with 10 GETs (about one master's share) routed again and no
      // MOVED: the message names the master connections' states and the client's refresh, to
      // tell which next time.
      expect(
        routed.count,
        JSON.stringify({
          masters: client.nodes('master').map((n) => `${n.options.host}:${n.options.port} ${n.status}`),
          status: client.status,
          routed: routed.keys
            .slice(routedAfter)
            .map((k) => `${k} slot ${keySlot(k)} at ${client.slots[keySlot(k)]?.[0]}`),
          owner: `${owner.host}:${owner.port}`,
          target: `${target.host}:${target.port}`,
        }),
      ).toBe(routedAfter)
    } finally {
      routed.restore()
    }
  })
})
