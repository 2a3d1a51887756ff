import { type RedisCluster, type RedisNode, startCluster } from '@kunci/topology'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Cache } from '../../src/cache/cache.js'
import { entryKeys } from '../../src/cache/cache-keys.js'
import { keySlot } from '../../src/cluster/slot.js'
import { runStorm } from '../fixtures/cache-spawn.js'

const PASSWORD = 'cache-cluster-secret'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
let seq = 0
const uniquePrefix = (name: string) => `c${process.pid}-${Date.now().toString(36)}-${seq++}-${name}`

let cluster: RedisCluster
let client: Cluster
const caches: Cache[] = []

function newClient(): Cluster {
  return new Cluster(cluster.startupNodes, { redisOptions: { password: PASSWORD } })
}

function newCache(options: Partial<ConstructorParameters<typeof Cache>[0]> & { prefix: string }): Cache {
  const cache = new Cache({ client, ...options })
  caches.push(cache)
  return cache
}

/** A direct connection to one node, for INFO and CLIENT commands that must not be routed. */
function direct(node: RedisNode): Redis {
  return new Redis({ host: node.host, port: node.port, password: PASSWORD })
}

async function slotOwners(keys: string[]): Promise<Set<string>> {
  const owners = new Set<string>()
  for (const key of keys) owners.add((await cluster.slotOwner(keySlot(key))).name)
  return owners
}

beforeAll(async () => {
  cluster = await startCluster({ password: PASSWORD })
  client = newClient()
  await client.ping()
})

afterAll(async () => {
  await Promise.all(caches.map((c) => c.close()))
  client?.disconnect()
  await cluster?.stop()
})

describe('Cache on a 3+3 Redis Cluster', () => {
  it('4 processes × 250 concurrent getOrSet on one cold key run the loader exactly once', async () => {
    const counterKey = uniquePrefix('count')
    const reports = await runStorm(4, {
      cluster: true,
      nodes: cluster.startupNodes,
      password: PASSWORD,
      prefix: uniquePrefix('storm1'),
      keys: ['hot'],
      perKey: 250,
      counterKey,
      loaderMs: 100,
    })
    expect(reports.map((r) => r.errors)).toEqual([0, 0, 0, 0])
    expect(reports.reduce((s, r) => s + r.ok, 0)).toBe(1000)
    expect(await client.hgetall(counterKey)).toEqual({ hot: '1' })
    expect(new Set(reports.flatMap((r) => r.loadedBy.hot!)).size).toBe(1)
  })

  it('4 processes × 200 distinct keys over every master run the loader exactly once per key', async () => {
    const prefix = uniquePrefix('storm200')
    const counterKey = uniquePrefix('count')
    const keys = Array.from({ length: 200 }, (_, i) => `item:${i}`)
    const masters = await cluster.masters()
    expect(await slotOwners(keys.map((k) => entryKeys(prefix, k).value))).toEqual(
      new Set(masters.map((m) => m.name)),
    )
    const reports = await runStorm(4, {
      cluster: true,
      nodes: cluster.startupNodes,
      password: PASSWORD,
      prefix,
      keys,
      perKey: 5,
      counterKey,
      loaderMs: 50,
    })
    expect(reports.map((r) => r.errors)).toEqual([0, 0, 0, 0])
    const counts = await client.hgetall(counterKey)
    expect(Object.keys(counts).sort()).toEqual([...keys].sort())
    expect(Object.entries(counts).filter(([, c]) => c !== '1')).toEqual([])
  })

  it('invalidatePrefix removes every matching key on every master and no other, without KEYS', async () => {
    const prefix = uniquePrefix('inv')
    const cache = newCache({ prefix })
    const other = newCache({ prefix: `${prefix}x` })
    const doomed = Array.from({ length: 60 }, (_, i) => `user:${i}`)
    const kept = [...Array.from({ length: 30 }, (_, i) => `order:${i}`), 'user', 'users:1', 'use']
    for (const key of [...doomed, ...kept]) await cache.set({ key, value: key })
    await other.set({ key: 'user:1', value: 'other cache' })
    const masters = await cluster.masters()
    expect(await slotOwners(doomed.map((k) => entryKeys(prefix, k).value))).toEqual(
      new Set(masters.map((m) => m.name)),
    )
    const conns = masters.map(direct)
    try {
      await Promise.all(conns.map((c) => c.config('RESETSTAT')))
      expect(await cache.invalidatePrefix('user:')).toBe(doomed.length)
      for (const key of doomed) expect(await cache.get(key)).toBeUndefined()
      for (const key of kept) expect(await cache.get(key)).toBe(key)
      expect(await other.get('user:1')).toBe('other cache')
      for (const c of conns) {
        const stats = (await c.info('commandstats')) as string
        expect(stats).toMatch(/cmdstat_scan:calls=[1-9]/)
        expect(stats).not.toMatch(/cmdstat_keys:/)
      }
    } finally {
      for (const c of conns) c.disconnect()
    }
  })

  it('keeps L1 coherent across instances through the bus on a cluster', async () => {
    const prefix = uniquePrefix('l1')
    const otherClient = newClient()
    const a = newCache({ prefix, l1MaxEntries: 100 })
    const b = new Cache({ client: otherClient, prefix, l1MaxEntries: 100 })
    try {
      const deadline = Date.now() + 5000
      while (!(a.busConnected && b.busConnected) && Date.now() < deadline) await sleep(20)
      expect(a.busConnected && b.busConnected).toBe(true)
      await a.set({ key: 'k', value: 1 })
      let tier: string | undefined
      b.on('hit', (e) => {
        tier = e.tier
      })
      // b's first read may race the bus message of a's set and (rightly) not fill L1.
      for (let i = 0; i < 50 && tier !== 'l1'; i++) {
        expect(await b.get('k')).toBe(1)
        await sleep(10)
      }
      expect(tier).toBe('l1')
      await a.set({ key: 'k', value: 2 })
      let seen: unknown
      for (let i = 0; i < 100 && seen !== 2; i++) {
        seen = await b.get('k')
        await sleep(10)
      }
      expect(seen).toBe(2)
    } finally {
      await b.close()
      otherClient.disconnect()
    }
  })

  it('keeps answering while a slot is migrated between masters', async () => {
    const prefix = uniquePrefix('migrate')
    const cache = newCache({ prefix })
    const keys = Array.from({ length: 40 }, (_, i) => `m:${i}`)
    for (const key of keys) await cache.set({ key, value: key })
    const slot = keySlot(entryKeys(prefix, keys[0]!).value)
    const owner = await cluster.slotOwner(slot)
    const target = (await cluster.masters()).find((m) => m.name !== owner.name)!
    let stop = false
    let errors = 0
    let reads = 0
    const load = (async () => {
      while (!stop) {
        for (const key of keys) {
          try {
            const v = await cache.getOrSet({ key, loader: () => key })
            if (v !== key) errors++
            reads++
          } catch {
            errors++
          }
        }
      }
    })()
    await cluster.migrateSlot(slot, target, { keysPerBatch: 1, pauseBetweenBatchesMs: 20 })
    stop = true
    await load
    expect((await cluster.slotOwner(slot)).name).toBe(target.name)
    expect(errors).toBe(0)
    expect(reads).toBeGreaterThan(keys.length)
  })
})
