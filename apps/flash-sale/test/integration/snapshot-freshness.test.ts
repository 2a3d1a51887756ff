// Issue 37 item 7: answers from memory had no freshness bound. An instance cut off from the sale's
// master kept answering SOLD_OUT from its snapshot (65 of 65 checkouts, the last 9.9 s after a
// restock made through another instance), because a failed per-second epoch read left the
// snapshot as it was. Now a snapshot answers only while a read of the master confirmed its epoch
// within maxAgeMs; past that the checkout goes to Redis, and answers 503 while it cannot reach it.
// Real 3-master Cluster; this "instance" reaches the sale's master through a fault proxy (ioredis
// natMap) that the test blackholes; the restock goes through a second client, straight.
import { type FaultProxy, type RedisCluster, startProxy } from '@kunci/topology'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { RedisClient } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { SaleSnapshots } from '../../src/sale/sale-snapshots.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { LuaStrategy } from '../../src/strategies/lua.js'
import { eventually } from '../support/eventually.js'
import { startSaleCluster } from '../support/sale-cluster.js'

const PRODUCT = 'fresh1'
const MAX_AGE_MS = 3_000 // the default
const CHECK_MS = 1_000 // the default

let cluster: RedisCluster
let proxy: FaultProxy
let cut: RedisClient
let direct: RedisClient
let snapshots: SaleSnapshots
let strategy: LuaStrategy

beforeAll(async () => {
  const sc = await startSaleCluster({ replicasPerMaster: 0 })
  cluster = sc.cluster
  const master = await cluster.slotOwner(keySlot(saleKeys(PRODUCT).meta))
  proxy = await startProxy({ host: master.host, port: master.port })
  cut = await sc.connect({
    name: 'instance-b',
    natMap: { [`${master.host}:${master.port}`]: { host: '127.0.0.1', port: proxy.port } },
    productId: PRODUCT,
  })
  direct = await sc.connect({ name: 'instance-a' })
  const store = new SaleStore(cut)
  snapshots = new SaleSnapshots(store, { maxAgeMs: MAX_AGE_MS, checkIntervalMs: CHECK_MS })
  snapshots.start()
  strategy = new LuaStrategy(store, { durability: 'none', snapshots })
}, 60_000)

afterAll(async () => {
  snapshots?.stop()
  cut?.disconnect()
  direct?.disconnect()
  await proxy?.close()
  await cluster?.stop()
})

it('an instance cut off from the sale master stops answering from memory within the bound; 503, then it sells the restock', async () => {
  const other = new SaleStore(direct)
  await other.preload({
    productId: PRODUCT,
    round: 1,
    stockTotal: 1,
    priceCents: 100,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: 1,
  })
  expect(
    await strategy.checkout({ productId: PRODUCT, userId: 'first', idempotencyKey: undefined }),
  ).toMatchObject({
    ok: true,
  })
  // Sold out: the snapshot loads and the instance answers from memory.
  await eventually(
    async () => strategy.answerFromMemory({ productId: PRODUCT, userId: 'x', idempotencyKey: undefined }),
    (a) => a?.code === 'SOLD_OUT',
    { what: 'answers from memory' },
  )
  // Cut off, and the sale restocked through the other instance meanwhile.
  proxy.blackhole(true)
  const cutAt = Date.now()
  try {
    const restocked = await other.restock(PRODUCT, 1, 5, '1')
    expect(restocked?.stock).toBe(5)
    const stoppedAt = await eventually(
      async () =>
        strategy.answerFromMemory({ productId: PRODUCT, userId: 'x', idempotencyKey: undefined }) ===
        undefined
          ? Date.now()
          : undefined,
      (t) => t !== undefined,
      { what: 'no more answers from memory', timeoutMs: 20_000 },
    )
    // The bound: the last confirmation was at most one check before the cut.
    expect(stoppedAt! - cutAt).toBeLessThanOrEqual(MAX_AGE_MS + 1_000)
    // What it answers now: the checkout reaches for Redis and cannot: 503, never SOLD_OUT.
    const answer = await strategy.checkout({ productId: PRODUCT, userId: 'y', idempotencyKey: undefined })
    expect(answer).toMatchObject({ ok: false, code: 'UNAVAILABLE' })
  } finally {
    // The proxy's blackhole discarded what was sent meanwhile (TCP would have kept it): the
    // connections are reset, as a real partition that outlasts TCP's retries ends.
    proxy.blackhole(false)
    proxy.dropConnections()
  }
  // Reconnected: it sells the restocked units.
  const sold = await eventually(
    () => strategy.checkout({ productId: PRODUCT, userId: 'z', idempotencyKey: undefined }),
    (a) => a.ok !== false || a.code !== 'UNAVAILABLE',
    { what: 'the instance reaches the master again', timeoutMs: 30_000 },
  )
  expect(sold).toMatchObject({ ok: true })
})
