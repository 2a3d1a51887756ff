/**
 * The kunci → Prometheus bridge against real lock nodes: acquire, contend, lose a lock, kill and
 * restart a node, read a cache, and check each counter moves by what happened (and only then).
 */
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { Cache, Redlock } from 'kunci'
import { Registry } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bridgeKunciMetrics, type KunciBridge } from '../../src/metrics/kunci-bridge.js'
import { eventually } from '../support/eventually.js'

const MAX_TTL_MS = 2000
let set: NodeSet
let registry: Registry
let bridge: KunciBridge
const clients: Redis[] = []
const managers: Redlock[] = []

function connect(): Redis[] {
  const cs = set.nodes.map(
    (n) =>
      new Redis({
        host: n.host,
        port: n.port,
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(times * 20, 200),
      }),
  )
  for (const c of cs) c.on('error', () => {}) // kills below make sockets fail on purpose
  clients.push(...cs)
  return cs
}

/** The persistence warnings each manager was given, by node index. */
const persistenceWarnings = new Map<Redlock, number[]>()

function manager(): Redlock {
  const nodes: number[] = []
  const m = new Redlock({
    clients: connect(),
    nodeTimeoutMs: 200,
    maxTtlMs: MAX_TTL_MS,
    onWarning: (w) => {
      if (w.code === 'KUNCI_W_PERSISTENCE') nodes.push(w.node)
    },
  })
  persistenceWarnings.set(m, nodes)
  managers.push(m)
  return m
}

/** The value of one series, 0 when it does not exist (yet). */
async function value(name: string, labels: Record<string, string> = {}): Promise<number> {
  // A histogram's _count series lives in the metric of the base name.
  const base = name.replace(/_count$/, '')
  const metric = registry.getSingleMetric(base)
  if (!metric) throw new Error(`metric ${base} is not registered`)
  const { values } = await metric.get()
  const match = values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? base) === name &&
      Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  )
  return match?.value ?? 0
}

/** Waits until `check` holds (the service's one polling helper, support/eventually.ts). */
const until = (what: string, check: () => Promise<boolean>, timeoutMs = 20_000) =>
  eventually(check, (ok) => ok, { what, timeoutMs, intervalMs: 25 })

beforeAll(async () => {
  registry = new Registry()
  bridge = bridgeKunciMetrics({ registry, lockName: 'test' })
  set = await startNodes({ count: 3 })
})

afterAll(async () => {
  bridge?.close()
  for (const m of managers) await m.close()
  for (const c of clients) c.disconnect()
  await set?.stop()
})

describe('kunci bridge', () => {
  let a: Redlock
  let b: Redlock

  it('counts the persistence warnings of nodes without AOF; the quarantine gauge falls back to 0', async () => {
    const persistence = () => value('kunci_lock_warnings_total', { code: 'KUNCI_W_PERSISTENCE' })
    const sorted = (m: Redlock) => [...persistenceWarnings.get(m)!].sort()
    a = manager()
    // Nodes without AOF are weaker than the default persistence 'always': one warning per node
    // (per run of the node), so exactly nodes 0, 1, 2 once each, and the counter says 3.
    await until('a warning from each of the 3 nodes', async () => new Set(sorted(a)).size === 3)
    await until('quarantine over', async () => (await value('kunci_lock_nodes_quarantined')) === 0)
    expect(sorted(a)).toEqual([0, 1, 2])
    expect(await persistence()).toBe(3)
    // A second manager checks the same nodes for itself: 3 more, 6 in all, none repeated.
    b = manager()
    await until('a warning from each node to the second manager', async () => new Set(sorted(b)).size === 3)
    await until('quarantine over', async () => (await value('kunci_lock_nodes_quarantined')) === 0)
    expect(sorted(b)).toEqual([0, 1, 2])
    expect(sorted(a)).toEqual([0, 1, 2])
    expect(await persistence()).toBe(6)
  })

  it('counts an acquire and observes its latency', async () => {
    const before = await value('kunci_lock_acquired_total')
    const countBefore = await value('kunci_lock_acquire_duration_seconds_count')
    const lock = await a.acquire('bridge:r1', { retryCount: 10 })
    expect(await value('kunci_lock_acquired_total')).toBe(before + 1)
    expect(await value('kunci_lock_acquire_duration_seconds_count')).toBe(countBefore + 1)
    await lock.release()
  })

  it('counts contention and the failure code when another manager holds the lock', async () => {
    const lock = await a.acquire('bridge:r2')
    const contentionBefore = await value('kunci_lock_contention_total')
    const err = await b.acquire('bridge:r2', { retryCount: 0 }).then(
      () => undefined,
      (e: { code: string }) => e,
    )
    expect(err?.code).toBe('E_LOCK_NOT_ACQUIRED')
    expect(await value('kunci_lock_contention_total')).toBeGreaterThan(contentionBefore)
    expect(await value('kunci_lock_failed_total', { code: 'E_LOCK_NOT_ACQUIRED' })).toBe(1)
    await lock.release()
  })

  it('counts a lock found lost at release', async () => {
    const lock = await a.acquire('bridge:r3', { ttlMs: 300 })
    // Let the key expire on every node, then let b take it, so the release finds someone else's token.
    const other = await b.acquire('bridge:r3', { retryCount: 50, retryDelayMs: 50 })
    const err = await lock.release().then(
      () => undefined,
      (e: { code: string }) => e,
    )
    expect(err?.code).toBe('E_LOCK_LOST')
    expect(await value('kunci_lock_lost_total')).toBe(1)
    await other.release()
  })

  it('counts cache hits, misses, loads and coalesced reads', async () => {
    const cacheClient = connect()[0]!
    const cache = new Cache({ client: cacheClient, prefix: 'bridge-test', l1MaxEntries: 100 })
    const stop = bridge.observeCache(cache, 'products')
    // L1 is read and filled only while the invalidation bus is up: wait for it, or the third
    // read below is an L2 hit whenever the bus subscribes later than the first load takes.
    await eventually(
      async () => cache.busConnected,
      (up) => up,
      { what: 'the cache bus to subscribe' },
    )
    let loads = 0
    const loader = async () => {
      loads++
      await new Promise((r) => setTimeout(r, 50))
      return { price: 10 }
    }
    await Promise.all([cache.getOrSet({ key: 'p1', loader }), cache.getOrSet({ key: 'p1', loader })])
    await cache.getOrSet({ key: 'p1', loader })
    expect(loads).toBe(1)
    expect(await value('kunci_cache_loads_total', { cache: 'products', outcome: 'value' })).toBe(1)
    expect(await value('kunci_cache_misses_total', { cache: 'products' })).toBeGreaterThanOrEqual(1)
    expect(await value('kunci_cache_coalesced_total', { cache: 'products', scope: 'process' })).toBe(1)
    expect(await value('kunci_cache_hits_total', { cache: 'products', tier: 'l1' })).toBe(1)
    expect(await value('kunci_cache_load_duration_seconds_count', { cache: 'products' })).toBe(1)
    stop()
    await cache.getOrSet({ key: 'p1', loader })
    expect(await value('kunci_cache_hits_total', { cache: 'products', tier: 'l1' })).toBe(1) // no longer counted
    await cache.close()
  })

  it('counts node errors for a killed node, and its quarantine once it is back', async () => {
    const victim = set.nodes[2]!
    await victim.kill()
    const lock = await a.acquire('bridge:r4') // 2 of 3 still make a quorum
    await until('a node error for node 2', async () => {
      const metric = await registry.getSingleMetric('kunci_lock_node_errors_total')!.get()
      return metric.values.some((v) => v.labels.node === '2' && v.value > 0)
    })
    const { values } = await registry.getSingleMetric('kunci_lock_node_errors_total')!.get()
    expect(values.filter((v) => v.labels.node !== '2').every((v) => v.value === 0)).toBe(true)
    await lock.release()

    const before = await value('kunci_lock_quarantined_total', { node: '2' })
    await victim.restart()
    await until(
      'node 2 quarantined again',
      async () => (await value('kunci_lock_quarantined_total', { node: '2' })) > before,
    )
    expect(await value('kunci_lock_nodes_quarantined')).toBeGreaterThanOrEqual(1)
    await until('quarantine of node 2 over', async () => (await value('kunci_lock_nodes_quarantined')) === 0)
  })

  it('stops counting after close()', async () => {
    bridge.close()
    const before = await value('kunci_lock_acquired_total')
    const lock = await a.acquire('bridge:r5', { retryCount: 20 })
    await lock.release()
    expect(await value('kunci_lock_acquired_total')).toBe(before)
  })
})
