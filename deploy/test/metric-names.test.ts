/**
 * Every metric the dashboard and the alert rules read is really exported: the service's and
 * kunci's by a prom-client Registry built as the service builds it, redis_exporter's by a live
 * prometheus-redis-exporter scraping a real (cluster-enabled) redis-server.
 */
import { execFileSync } from 'node:child_process'
import { channel } from 'node:diagnostics_channel'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type NodeSet, startNodes } from '@kunci/topology'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bridgeKunciMetrics } from '../../apps/flash-sale/src/metrics/kunci-bridge.js'
import { createServiceMetrics } from '../../apps/flash-sale/src/metrics/service-metrics.js'
import {
  type Observability,
  startObservability,
} from '../../apps/flash-sale-lab/src/observe/local-observability.js'
import { metricNamesIn, metricNamesUsed, PROMETHEUS_SYNTHETIC, seriesNamesIn } from '../src/metric-names.js'

const REPO = fileURLToPath(new URL('../../', import.meta.url))
const used = metricNamesUsed()
const isRedis = (n: string) => n.startsWith('redis_')
const missing = (names: string[], exposed: Set<string>) => names.filter((n) => !exposed.has(n))

describe('metric names in PromQL', () => {
  it('finds series names and skips functions, label names, values and ranges', () => {
    expect(
      metricNamesIn(
        'histogram_quantile(0.99, sum by (le, strategy) (rate(x_bucket{status=~"5..", job="a_b"}[5m]))) / on (job) group_left (pod) y > 0 and up',
      ).sort(),
    ).toEqual(['up', 'x_bucket', 'y'])
  })

  it('covers the service, kunci and redis_exporter families', () => {
    expect(used.some((n) => n.startsWith('flash_sale_'))).toBe(true)
    expect(used.some((n) => n.startsWith('kunci_lock_'))).toBe(true)
    expect(used.some((n) => n.startsWith('kunci_cache_'))).toBe(true)
    expect(used).toEqual(
      expect.arrayContaining([
        'flash_sale_waiting_room_waiting',
        'flash_sale_waiting_room_admitted',
        'flash_sale_waiting_room_admit_rate',
        'flash_sale_waiting_room_admitted_total',
        'flash_sale_waiting_room_wait_seconds_bucket',
        'flash_sale_waiting_room_dropped_total',
        'flash_sale_waiting_room_refusals_total',
        'flash_sale_waiting_room_requests_total',
        'flash_sale_waiting_room_unreplicated_total',
      ]),
    )
    expect(used.filter(isRedis)).toEqual(
      expect.arrayContaining(['redis_cluster_state', 'redis_evicted_keys_total']),
    )
  })
})

describe('service and kunci names', () => {
  it('are all exported by a registry built like the service (service metrics, kunci bridge, default metrics)', async () => {
    const registry = new Registry()
    collectDefaultMetrics({ register: registry })
    const m = createServiceMetrics(registry)
    const bridge = bridgeKunciMetrics({ registry })
    // Exercise every labelled metric once so its series exist, as a live service's would.
    m.checkouts.inc({ strategy: 'lua', outcome: 'reserved', status: '200' })
    m.checkoutDuration.observe({ strategy: 'lua' }, 0.002)
    m.inflight.set(1)
    m.shed.inc({ reason: 'event-loop' })
    m.stockRemaining.set({ product_id: '1' }, 10)
    m.streamPending.set({ product_id: '1' }, 0)
    m.streamLag.set({ product_id: '1' }, 0)
    m.deadLetters.inc({ product_id: '1' })
    m.unconfirmedReads.inc({ product_id: '1' })
    m.ordersPersisted.inc({ product_id: '1' })
    m.ordersFailed.inc({ product_id: '1', reason: 'stale-round' })
    m.walletCharges.inc()
    m.drift.set({ product_id: '1' }, 0)
    m.notKept.set({ product_id: '1' }, 0)
    m.saleStoreUnreachable.set({ product_id: '1' }, 0)
    m.saleEpoch.set({ product_id: '1' }, 1)
    m.saleResyncs.inc({ product_id: '1' }, 0)
    m.reserveBatchSize.observe({ kind: 'reserve' }, 3)
    m.sqlBatchSize.observe(10)
    m.workerBatchSeconds.observe({ phase: 'sql' }, 0.02)
    // The waiting room's series exist once a room has answered (as on a live service with a room).
    const room = m.waitingRoom
    room.waiting.set({ product_id: '1' }, 10)
    room.admitted.set({ product_id: '1' }, 2)
    room.admitRate.set({ product_id: '1' }, 5)
    room.admittedTotal.inc({ product_id: '1' }, 2)
    room.waitSeconds.observe({ product_id: '1' }, 3)
    room.dropped.inc({ product_id: '1', reason: 'idle' })
    room.refusals.inc({ code: 'INVALID_TICKET', reason: 'signature' })
    room.requests.inc({ op: 'poll', outcome: 'waiting' })
    room.unreplicated.inc({ what: 'answers' })
    // kunci's own channels, with the message shapes of docs/locks.md#observability.
    channel('kunci:lock:acquired').publish({ resources: ['r'], fence: 1n, attempts: 1, durationMs: 3 })
    channel('kunci:lock:failed').publish({
      resources: ['r'],
      code: 'E_LOCK_UNAVAILABLE',
      attempts: 1,
      durationMs: 5,
    })
    channel('kunci:lock:contention').publish({ resources: ['r'], attempt: 1 })
    channel('kunci:lock:node-error').publish({ node: 2, op: 'acquire', status: 'timeout' })
    channel('kunci:lock:lost').publish({ resources: ['r'], fence: 1n, reason: 'release' })
    channel('kunci:lock:quarantined').publish({ node: 2, runId: 'x', restarted: true, quarantineMs: 1000 })
    const listeners = new Map<string, (e: unknown) => void>()
    bridge.observeCache(
      {
        on: ((name: string, fn: (e: unknown) => void) => {
          listeners.set(name, fn)
          return () => listeners.delete(name)
        }) as never,
      },
      'products',
    )
    listeners.get('hit')?.({ key: 'k', tier: 'l1' })
    listeners.get('miss')?.({ key: 'k' })
    listeners.get('stale')?.({ key: 'k', reason: 'refreshing' })
    listeners.get('load')?.({ key: 'k', durationMs: 4, outcome: 'value', early: false })
    listeners.get('coalesced')?.({ key: 'k', scope: 'fleet' })
    listeners.get('error')?.({ key: 'k', operation: 'write', error: new Error('x') })
    listeners.get('bus-drop')?.({ reason: 'test' })

    const exposed = seriesNamesIn(await registry.metrics())
    bridge.close()
    const serviceNames = used.filter((n) => !isRedis(n) && !PROMETHEUS_SYNTHETIC.includes(n))
    expect(serviceNames.length).toBeGreaterThan(20)
    expect(missing(serviceNames, exposed)).toEqual([])
    expect(missing(['flash_sale_not_a_metric'], exposed)).toEqual(['flash_sale_not_a_metric'])
  })
})

describe('redis_exporter names', () => {
  let nodes: NodeSet | undefined
  let obs: Observability | undefined
  let dir: string | undefined

  beforeAll(async () => {
    execFileSync('node', ['scripts/ensure-tools.mjs', 'prometheus', 'redis_exporter'], {
      cwd: REPO,
      stdio: 'inherit',
      env: { ...process.env, KUNCI_QUIET: '1' },
    })
    // cluster-enabled, so the exporter also reports the redis_cluster_* family.
    nodes = await startNodes({ count: 1, proxy: false, extraArgs: ['--cluster-enabled', 'yes'] })
    dir = mkdtempSync(join(tmpdir(), 'kunci-metric-names-'))
    const node = nodes.nodes[0]!
    obs = await startObservability({
      dir,
      serviceTargets: [],
      workerTargets: [],
      redis: [{ addr: `${node.host}:${node.port}`, job: 'redis-cluster' }],
    })
  }, 120_000)

  afterAll(async () => {
    await obs?.stop()
    await nodes?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('are all exported by prometheus-redis-exporter scraping a real redis-server', async () => {
    const page = await (await fetch(obs!.exporterUrls[0]!)).text()
    expect(page).toMatch(/^redis_up 1$/m)
    const exposed = seriesNamesIn(page)
    const redisNames = used.filter(isRedis)
    expect(redisNames.length).toBeGreaterThan(5)
    expect(missing(redisNames, exposed)).toEqual([])
  }, 60_000)
})
