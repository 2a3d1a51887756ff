/**
 * RedisLock and Cache on one standalone node and on a 3+3 Redis Cluster, run once per supported
 * client library (ioredis, node-redis). One cluster serves both kinds: every test writes under
 * its own prefix, so the two runs cannot see each other's keys.
 */
import { type NodeSet, type RedisCluster, startCluster, startNodes } from '@kunci/topology'
import { Cache, deleteByPattern, fencedWrite, type KunciClient, RedisLock, readFenced, scanKeys } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { entryKeys } from '../../../src/cache/cache-keys.js'
import { keySlot } from '../../../src/cluster/slot.js'
import { CLIENT_KINDS, type ClientKind } from '../../support/clients.js'
import { History } from '../../support/history.js'
import { until } from '../../support/nodes.js'

let single: NodeSet
let cluster: RedisCluster
beforeAll(async () => {
  ;[single, cluster] = await Promise.all([
    startNodes({ count: 1, proxy: false }),
    startCluster({ masters: 3, replicasPerMaster: 1 }),
  ])
})
afterAll(async () => {
  await single?.stop()
  await cluster?.stop()
})

describe.each(CLIENT_KINDS)('RedisLock and Cache with $name clients', ({ name, make }) => {
  let kind: ClientKind
  const closers: (() => Promise<unknown>)[] = []
  const tag = `${name}-${process.pid}`

  beforeAll(() => {
    kind = make()
  })
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c()
    await kind?.closeAll()
  })

  const standalone = () => kind.standalone(single.nodes[0]!)
  const clustered = () => kind.cluster(cluster.startupNodes)
  function lock(client: KunciClient): RedisLock {
    // A generous nodeTimeoutMs (default 200): these tests are about exclusion, fences and wake-ups,
    // and on a loaded machine a release that took longer threw LockUnavailableError (seen in CI).
    const l = new RedisLock({
      client,
      quarantine: false,
      nodeTimeoutMs: 2_000,
      prefix: `rl-${tag}:`,
      onWarning: () => {},
    })
    closers.push(() => l.close())
    return l
  }
  function cache(client: KunciClient, o: { prefix: string; l1MaxEntries?: number }): Cache {
    const c = new Cache({ client, ...o })
    closers.push(() => c.close())
    return c
  }

  it.each([
    ['standalone', standalone],
    ['3+3 cluster', clustered],
  ] as const)(
    'RedisLock on %s: exclusive among contenders, fences increase, waiters are woken',
    async (_, connect) => {
      const workers = await Promise.all([0, 1, 2].map(async () => lock(await connect())))
      const history = new History()
      const resources = ['{acct}:a', '{acct}:b'] // one hash tag: one slot on a cluster
      await Promise.all(
        workers.map(async (m, w) => {
          for (let i = 0; i < 10; i++) {
            const held = await m.acquire(resources, { ttlMs: 2000, retryCount: 1000, retryDelayMs: 100 })
            const end = history.begin('acct', held.fence, `w${w}`, held.validityMs)
            await new Promise((r) => setImmediate(r))
            end()
            await held.release()
          }
        }),
      )
      expect(history.holds).toHaveLength(30)
      expect(history.violations()).toEqual([])

      // A fenced write from a stale holder is refused; the current one is applied.
      const client = await connect()
      const key = `{fenced-${tag}}:record`
      const first = await workers[0]!.acquire('fenced', { ttlMs: 2000 })
      await first.release()
      const second = await workers[1]!.using('fenced', { ttlMs: 2000 }, async (_s, l) => {
        expect(l.fence).toBeGreaterThan(first.fence)
        expect(await fencedWrite(client, { key, fence: l.fence, value: 'second' })).toEqual({
          applied: true,
          fence: l.fence,
        })
        return l.fence
      })
      expect(await fencedWrite(client, { key, fence: first.fence, value: 'stale' })).toEqual({
        applied: false,
        fence: second,
      })
      expect(await readFenced(client, key)).toEqual({ value: 'second', fence: second })
    },
  )

  it.each([
    ['standalone', standalone],
    ['3+3 cluster', clustered],
  ] as const)(
    'Cache on %s: one loader run for a stampede over two clients; L1 invalidated through the bus',
    async (_, connect) => {
      const prefix = `c-${tag}-${performance.now().toFixed(0)}`
      const [ca, cb] = await Promise.all([connect(), connect()])
      const a = cache(ca, { prefix, l1MaxEntries: 100 })
      const b = cache(cb, { prefix, l1MaxEntries: 100 })
      await until(() => a.busConnected && b.busConnected, 'both caches to subscribe to the bus')

      let loads = 0
      const loader = async () => {
        loads++
        await new Promise((r) => setTimeout(r, 200))
        return { v: 1 }
      }
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).getOrSet({ key: 'hot', loader, ttlMs: 60_000 })),
      )
      expect(loads).toBe(1)
      expect(results.every((r) => r.v === 1)).toBe(true)

      // b serves 'hot' from its L1 now; a's write must reach it through the bus.
      const tiers: string[] = []
      b.on('hit', (e) => tiers.push(e.tier))
      const refuse = async (): Promise<{ v: number }> => {
        throw new Error('the loader must not run again')
      }
      expect(await b.getOrSet({ key: 'hot', loader: refuse })).toEqual({ v: 1 })
      expect(await b.getOrSet({ key: 'hot', loader: refuse })).toEqual({ v: 1 })
      expect(tiers.at(-1)).toBe('l1')
      await a.set({ key: 'hot', value: { v: 2 } })
      await until(
        async () => (await b.getOrSet({ key: 'hot', loader: refuse })).v === 2,
        "b's L1 to drop the old value",
      )
      await a.delete('hot')
      await until(async () => (await b.get('hot')) === undefined, "b's L1 to drop the deleted key")
    },
  )

  it('Cache on the cluster: invalidatePrefix deletes on every master; scanKeys and deleteByPattern walk them all', async () => {
    const client = await clustered()
    const prefix = `ip-${tag}`
    const c = cache(client, { prefix })
    const keys = Array.from({ length: 60 }, (_, i) => `user:${i}`)
    for (const key of keys) await c.set({ key, value: key, ttlMs: 60_000 })
    await c.set({ key: 'other:1', value: 'x', ttlMs: 60_000 })
    // The entries spread over the three masters (each entry has its own hash tag).
    const owners = new Set<string>()
    for (const key of keys) owners.add((await cluster.slotOwner(keySlot(entryKeys(prefix, key).value))).name)
    expect(owners.size).toBe(3)
    expect(await c.invalidatePrefix('user:')).toBe(60)
    for (const key of keys.slice(0, 5)) expect(await c.get(key)).toBeUndefined()
    expect(await c.get('other:1')).toBe('x')

    const scanned = `scan-${tag}-`
    await Promise.all(keys.map((k, i) => c.set({ key: `${scanned}${i}`, value: k, ttlMs: 60_000 })))
    const seen: string[] = []
    for await (const batch of scanKeys(client, { match: `*${scanned}*` })) seen.push(...batch)
    expect(new Set(seen).size).toBe(60)
    expect(await deleteByPattern(client, { match: `*${scanned}*` })).toBe(60)
    expect(await c.get(`${scanned}0`)).toBeUndefined()
  })
})
