/**
 * The single-node lock: the same API on one standalone Redis and on a Redis Cluster client
 * (lock and fence keys in the resource's hash slot), with best-effort WAIT for replicas.
 */
import { type NodeSet, type RedisCluster, startCluster, startNodes } from '@kunci/topology'
import { Cluster, Redis } from 'ioredis'
import { keySlot, LockNotAcquiredError, RedisLock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { History } from '../support/history.js'
import { sleep } from '../support/nodes.js'

let single: NodeSet
let cluster: RedisCluster
let standalone: Redis
let clusterClient: Cluster
const locks: RedisLock[] = []

beforeAll(async () => {
  ;[single, cluster] = await Promise.all([
    startNodes({ count: 1, proxy: false }),
    startCluster({ password: 'pw' }),
  ])
  standalone = new Redis({ port: single.nodes[0]!.port })
  clusterClient = new Cluster(cluster.startupNodes, { redisOptions: { password: 'pw' } })
})
afterAll(async () => {
  for (const l of locks) await l.close()
  standalone?.disconnect()
  clusterClient?.disconnect()
  await single?.stop()
  await cluster?.stop()
})

function lockOn(client: Redis | Cluster, extra = {}): RedisLock {
  const l = new RedisLock({ client, quarantine: false, onWarning: () => {}, ...extra })
  locks.push(l)
  return l
}

describe.each([
  ['standalone', () => standalone],
  ['cluster', () => clusterClient],
])('RedisLock on %s', (_name, client) => {
  it('acquires, hands over and releases with increasing fences', async () => {
    const a = lockOn(client())
    const b = lockOn(client())
    const first = await a.acquire('order:1', { ttlMs: 2000 })
    await expect(b.acquire('order:1', { retryCount: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError)
    const waiting = b.acquire('order:1', { retryDelayMs: 2000 })
    await sleep(50)
    await first.release()
    const second = await waiting
    expect(second.fence).toBeGreaterThan(first.fence)
    await second.release()
  })

  it('keeps 16 workers of 4 pods mutually exclusive on hot keys spread over slots', async () => {
    const pods = Array.from({ length: 4 }, () => lockOn(client()))
    const history = new History()
    const end = performance.now() + 1500
    let n = 0
    await Promise.all(
      pods.flatMap((pod, p) =>
        Array.from({ length: 4 }, async (_, w) => {
          while (performance.now() < end) {
            const r = `hot:${Math.floor(Math.random() * 4)}`
            const lock = await pod.acquire(r, {
              ttlMs: 1000,
              retryCount: 200,
              retryDelayMs: 10,
              acquireTimeoutMs: 3000,
            })
            const done = history.begin(r, lock.fence, `${p}.${w}`, lock.validityMs)
            await sleep(1)
            done()
            await lock.release()
            n++
          }
        }),
      ),
    )
    expect(history.violations()).toEqual([])
    expect(n).toBeGreaterThan(100)
  })

  it('locks several resources atomically when they share a hash tag', async () => {
    const l = lockOn(client())
    const lock = await l.acquire(['{order:7}:stock', '{order:7}:payment'], { ttlMs: 1000 })
    await lock.extend()
    await lock.release()
    expect(lock.state).toBe('released')
  })
})

describe('RedisLock on one node', () => {
  it('sends a large tick in chunks of 16 requests, so the client works while the server runs the rest', async () => {
    const l = lockOn(standalone)
    await standalone.config('RESETSTAT')
    const resources = Array.from({ length: 64 }, (_, i) => `chunked:${i}`)
    const held = await Promise.all(resources.map((r) => l.acquire(r, { ttlMs: 5000, retryCount: 0 })))
    const stats = await standalone.info('commandstats')
    // 64 acquisitions of one tick: 4 script calls of 16 (one call of 64 moved in lockstep).
    expect(Number(/cmdstat_evalsha:calls=(\d+),/.exec(stats)?.[1])).toBe(4)
    expect(new Set(held.map((h) => h.token)).size).toBe(64)
    const values = await standalone.mget(...resources.map((r) => `kunci:{${r}}`))
    expect(values).toEqual(held.map((h) => h.token))
    await Promise.all(held.map((h) => h.release()))
    expect(await standalone.exists(...resources.map((r) => `kunci:{${r}}`))).toBe(0)
  })
})

describe('RedisLock on a cluster', () => {
  it('puts the lock and fence keys of a resource in one slot', async () => {
    const l = lockOn(clusterClient)
    const lock = await l.acquire('user:42', { ttlMs: 1000 })
    expect(keySlot('kunci:{user:42}')).toBe(keySlot('kunci:{user:42}:fence'))
    expect(await clusterClient.get('kunci:{user:42}')).toBe(lock.token)
    expect(Number(await clusterClient.get('kunci:{user:42}:fence'))).toBe(lock.fence)
    await lock.release()
  })

  it('refuses resources of different slots in one lock, with a message that says to use a hash tag', async () => {
    const l = lockOn(clusterClient)
    await expect(l.acquire(['a', 'b'])).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
      option: 'resources',
    })
  })

  it('with an auto-pipelining client, locks on several masters in one tick are all granted', async () => {
    // ioredis' Cluster auto-pipeline files EVALSHA under the slot of its first argument, the SHA:
    // one tick's calls for keys on two masters would share one pipeline and fail together.
    const piped = new Cluster(cluster.startupNodes, {
      enableAutoPipelining: true,
      redisOptions: { password: 'pw' },
    })
    try {
      const l = lockOn(piped)
      const resources = Array.from({ length: 30 }, (_, i) => `piped:${i}`)
      const masters = new Set(
        await Promise.all(
          resources.map(async (r) => (await cluster.slotOwner(keySlot(`kunci:{${r}}`))).port),
        ),
      )
      expect(masters.size).toBe(3)
      const held = await Promise.all(resources.map((r) => l.acquire(r, { ttlMs: 5000, retryCount: 0 })))
      for (const [i, lock] of held.entries()) {
        expect(await clusterClient.get(`kunci:{${resources[i]}}`)).toBe(lock.token)
      }
      await Promise.all(held.map((lock) => lock.release()))
      expect(await Promise.all(resources.map((r) => clusterClient.exists(`kunci:{${r}}`)))).toEqual(
        resources.map(() => 0),
      )
    } finally {
      piped.disconnect()
    }
  })

  it('waits for a replica acknowledgement with waitForReplicas (best effort)', async () => {
    const l = lockOn(clusterClient, { waitForReplicas: { replicas: 1, timeoutMs: 500 } })
    const master = await cluster.slotOwner(keySlot('kunci:{replicated}'))
    const m = new Redis({ port: master.port, password: 'pw' })
    await m.config('RESETSTAT')
    const lock = await l.acquire('replicated', { ttlMs: 2000 })
    // WAIT went to the slot's master, on the connection that wrote the lock...
    const stats = await m.info('commandstats')
    m.disconnect()
    expect(stats).toMatch(/cmdstat_wait:calls=1,/)
    // ...so its replica has the key by the time acquire returns.
    const replica = await cluster.replicaOf(master)
    expect(replica).toBeDefined()
    const r = new Redis({ port: replica!.port, password: 'pw' })
    try {
      await r.readonly()
      expect(await r.get('kunci:{replicated}')).toBe(lock.token)
    } finally {
      r.disconnect()
    }
    await lock.release()
  })
})
