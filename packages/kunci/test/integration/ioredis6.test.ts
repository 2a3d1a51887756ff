/**
 * ioredis is a peer dependency: users bring 5.x or 6.x (6 speaks RESP3 by default). The same
 * lock flows run here with ioredis 6 clients, standalone and cluster.
 */
import { type NodeSet, type RedisCluster, startCluster, startNodes } from '@kunci/topology'
import { Cluster as Cluster6, Redis as Redis6 } from 'ioredis6'
import { Cache, keySlot, RedisLock, Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { commandSender } from '../../src/redis/ioredis/command.js'
import { queuedOn, sleep, until } from '../support/nodes.js'

let nodes: NodeSet
let cluster: RedisCluster
const closers: (() => unknown)[] = []
beforeAll(async () => {
  ;[nodes, cluster] = await Promise.all([
    startNodes({ count: 3, proxy: false }),
    startCluster({ replicasPerMaster: 0 }),
  ])
})
afterAll(async () => {
  for (const c of closers.reverse()) await c()
  await nodes?.stop()
  await cluster?.stop()
})

function redlock6(): Redlock {
  const clients = nodes.nodes.map((n) => new Redis6({ port: n.port }))
  const rl = new Redlock({ clients, quarantine: false, onWarning: () => {} })
  closers.push(() => {
    for (const c of clients) c.disconnect()
  })
  closers.push(() => rl.close())
  return rl
}

describe('with ioredis 6 clients', () => {
  it('Redlock: acquire, wait woken by pub/sub, local hand-over, extend, using, release', async () => {
    const a = redlock6()
    const b = redlock6()
    const probe = nodes.nodes.map((n) => new Redis6({ port: n.port }))
    closers.push(() => {
      for (const c of probe) c.disconnect()
    })
    const first = await a.acquire('r', { ttlMs: 2000 })
    const remote = b.acquire('r', { retryDelayMs: 3000, retryJitterMs: 0 })
    const local = a.acquire('r', { ttlMs: 2000 })
    // `remote` queued on a majority, so the release below wakes it rather than its 3 s retry.
    await until(async () => (await queuedOn(probe, 'kunci:{r}:q')) >= 2, 'the remote waiter to queue')
    await first.release() // hands over to `local`
    const second = await local
    expect(second.fence).toBeGreaterThan(first.fence)
    await second.extend()
    const t0 = performance.now()
    await second.release() // wakes `remote` through the release notification
    const third = await remote
    expect(performance.now() - t0).toBeLessThan(1000)
    expect(third.fence).toBeGreaterThan(second.fence)
    await third.release()
    const aborted = await a.using('u', { ttlMs: 1000, extendBeforeMs: 800 }, async (signal) => {
      await sleep(2500) // past the ttl: extended in the background, 800 ms ahead (slack for a loaded machine)
      return signal.aborted
    })
    expect(aborted).toBe(false)
  })

  it('RedisLock on a Cluster client', async () => {
    const c = new Cluster6(cluster.startupNodes)
    closers.push(() => c.disconnect())
    const l = new RedisLock({ client: c, quarantine: false, onWarning: () => {} })
    closers.push(() => l.close())
    const lock = await l.acquire(['{o:1}:a', '{o:1}:b'], { ttlMs: 1000 })
    await expect(l.acquire('{o:1}:a', { retryCount: 0 })).rejects.toMatchObject({
      code: 'E_LOCK_NOT_ACQUIRED',
    })
    await lock.release()
    const again = await l.acquire('{o:1}:a', { ttlMs: 1000 })
    expect(again.fence).toBeGreaterThan(lock.fence)
    await again.release()
  })

  it('Cache: one loader call for 100 concurrent cold reads, and L1 kept coherent over the RESP3 bus', async () => {
    const port = nodes.nodes[0]!.port
    const [c1, c2] = [new Redis6({ port }), new Redis6({ port })]
    closers.push(() => {
      c1.disconnect()
      c2.disconnect()
    })
    const a = new Cache({ client: c1, l1MaxEntries: 100 })
    const b = new Cache({ client: c2, l1MaxEntries: 100 })
    closers.push(() => a.close())
    closers.push(() => b.close())
    let calls = 0
    const loader = async () => {
      calls++
      await sleep(50)
      return { n: 1 }
    }
    const values = await Promise.all(
      Array.from({ length: 100 }, (_, i) => (i % 2 ? a : b).getOrSet({ key: 'cold', ttlMs: 10_000, loader })),
    )
    expect(calls).toBe(1)
    expect(values.every((v) => v.n === 1)).toBe(true)
    for (const end = Date.now() + 10_000; !(a.busConnected && b.busConnected) && Date.now() < end; )
      await sleep(20)
    expect(await b.get('cold')).toEqual({ n: 1 }) // now in b's L1
    await a.set({ key: 'cold', value: { n: 2 }, ttlMs: 10_000 })
    let seen: unknown
    for (const end = Date.now() + 10_000; Date.now() < end; ) {
      seen = await b.get('cold')
      if ((seen as { n: number }).n === 2) break
      await sleep(20)
    }
    expect(seen).toEqual({ n: 2 })
  })

  it('another copy takes the raw command path: one tick of lock scripts on every master of an auto-pipelining Cluster', async () => {
    // ioredis 6 is a copy kunci does not resolve (kunci's own dependency is 5.9.2): its clients
    // get the raw command path (the copy's Command class, learned from the client), which the
    // old instanceof check refused them (L2 hits at half speed: bench/cache, both copies), and
    // scripts through it are routed by their keys on an auto-pipelining Cluster.
    const c = new Cluster6(cluster.startupNodes, { enableAutoPipelining: true })
    closers.push(() => c.disconnect())
    expect(commandSender(c as never)).toBeDefined()
    expect(
      commandSender(new Redis6({ port: nodes.nodes[0]!.port, lazyConnect: true }) as never),
    ).toBeDefined()
    const l = new RedisLock({ client: c, quarantine: false, onWarning: () => {} })
    closers.push(() => l.close())
    await l.acquire('warm-up', { ttlMs: 1000 }).then((x) => x.release())
    const keys = Array.from({ length: 30 }, (_, i) => `spread-${i}`)
    const masters = new Set(keys.map((k) => c.slots[keySlot(`{${k}}`)]?.[0]))
    expect(masters.size).toBeGreaterThan(1)
    const locks = await Promise.all(keys.map((k) => l.acquire(k, { ttlMs: 5_000, retryCount: 0 })))
    expect(locks).toHaveLength(30)
    await Promise.all(locks.map((x) => x.release()))
  })
})
