// Issue 37 item 3: ioredis' Cluster client sends a command again when the connection it was
// written on closes before the reply ("Connection is closed."), though the server may have run it.
// Each case here makes that happen for certain: a fault proxy in front of the sale's master holds
// the replies back, the test waits until the script's effect shows on the node itself, then resets
// the client's connections. The call is sent again and its script runs a second time; the answer
// and the data must be those of one run. Real 3-master Cluster, the service's own client settings
// (connectSaleRedis), the proxy mapped in with ioredis' natMap.
import { type FaultProxy, type RedisCluster, startProxy } from '@kunci/topology'
import { Redis } from 'ioredis'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { RedisClient } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { eventually } from '../support/eventually.js'
import { type SaleCluster, startSaleCluster } from '../support/sale-cluster.js'

const PRODUCT = 'rs1' // every case uses this sale: its master is the one behind the proxy

let sc: SaleCluster
let cluster: RedisCluster
let proxy: FaultProxy
let client: RedisClient
/** Straight to the sale's master, past the proxy: what the node really holds. */
let node: Redis
let store: SaleStore

beforeAll(async () => {
  sc = await startSaleCluster({ replicasPerMaster: 0 })
  cluster = sc.cluster
  const master = await cluster.slotOwner(keySlot(saleKeys(PRODUCT).meta))
  proxy = await startProxy({ host: master.host, port: master.port })
  client = await sc.connect({
    name: 'resend-test',
    natMap: { [`${master.host}:${master.port}`]: { host: '127.0.0.1', port: proxy.port } },
    productId: PRODUCT,
  })
  node = new Redis({ host: master.host, port: master.port, password: 'pw' })
  store = new SaleStore(client)
}, 60_000)

afterAll(async () => {
  client?.disconnect()
  node?.disconnect()
  await proxy?.close()
  await cluster?.stop()
})

/**
 * Runs `call` with its reply held back until `ran()` shows on the node, then drops the client's
 * connections: the client sends the call again, and its answer is what `call` resolves to.
 */
async function resent<T>(
  call: () => Promise<T>,
  ran: () => Promise<boolean>,
  /** Scripts `ran` itself runs on the node. */
  othersRun = 0,
): Promise<T> {
  const before = await scriptRuns()
  proxy.setLatency(1_000, 0, 'to-client')
  const answer = call()
  answer.catch(() => {}) // awaited below
  try {
    await eventually(ran, (done) => done, { what: 'the script ran on the node', intervalMs: 5 })
  } finally {
    proxy.reset()
    proxy.dropConnections()
  }
  const reply = await answer
  // The call really ran twice on the node (else this test would prove nothing).
  expect((await scriptRuns()) - before - othersRun).toBeGreaterThanOrEqual(2)
  return reply
}

/** Scripts the sale's master has run (EVALSHA and EVAL calls, INFO commandstats). */
async function scriptRuns(): Promise<number> {
  const info = await node.info('commandstats')
  let n = 0
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) n += Number(m[1])
  return n
}

async function preload(round: number, perUserLimit: number, stock = 10): Promise<number> {
  return store.preload({
    productId: PRODUCT,
    round,
    stockTotal: stock,
    priceCents: 100,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit,
  })
}

const k = saleKeys(PRODUCT)
const entriesOf = async (orderId: string) =>
  ((await node.xrange(k.orders, '-', '+')) as [string, string[]][]).filter(
    ([, f]) => f[f.indexOf('order_id') + 1] === orderId,
  ).length

it('a keyless checkout sent twice (limit 2, then limit 1): one unit, one event, its own order answered', async () => {
  for (const [round, limit] of [
    [1, 2],
    [2, 1],
  ] as const) {
    await preload(round, limit)
    for (let i = 0; i < 3; i++) {
      const orderId = `${PRODUCT}.r${round}-u${i}`
      const stockBefore = Number(await node.get(k.stock))
      const reply = await resent(
        () =>
          store.reserve({
            productId: PRODUCT,
            userId: `u${i}`,
            orderId,
            idempotencyKey: undefined,
            roomGen: '',
          }),
        async () => (await node.hexists(k.status, orderId)) === 1,
      )
      expect({ code: reply.code, orderId: reply.orderId }).toEqual({ code: 'RESERVED', orderId })
      expect(await entriesOf(orderId)).toBe(1)
      expect(Number(await node.get(k.stock))).toBe(stockBefore - 1)
      expect((await node.hget(k.buyers, `u${i}`))?.split('|')[0]).toBe('1')
    }
  }
})

it('a checkout with an Idempotency-Key sent twice: one unit, the key answers the same order', async () => {
  await preload(3, 2)
  const orderId = `${PRODUCT}.keyed`
  const reply = await resent(
    () => store.reserve({ productId: PRODUCT, userId: 'ku', orderId, idempotencyKey: 'key-1', roomGen: '' }),
    async () => (await node.hexists(k.status, orderId)) === 1,
  )
  expect(reply.code).toBe('RESERVED')
  expect(reply.orderId).toBe(orderId)
  expect(await entriesOf(orderId)).toBe(1)
  expect(await node.get(k.stock)).toBe('9')
  expect(await node.hget(k.idem, 'key-1')).toBe(`RESERVED|${orderId}|ku`)
})

it('a preload sent twice, with a reservation in between: the reservation is kept, the epoch grows once', async () => {
  await preload(4, 1)
  const epochBefore = Number(await node.hget(k.meta, 'epoch'))
  // A second client straight to the node's Cluster (no proxy) reserves between the two runs.
  const direct = await sc.connect()
  try {
    const other = new SaleStore(direct)
    const epoch = await resent(
      () => preload(5, 1),
      async () => {
        if ((await node.hget(k.meta, 'round')) !== '5') return false
        const r = await other.reserve({
          productId: PRODUCT,
          userId: 'between',
          orderId: `${PRODUCT}.between`,
          idempotencyKey: undefined,
          roomGen: '',
        })
        expect(r.code).toBe('RESERVED')
        return true
      },
      1,
    )
    expect(epoch).toBe(epochBefore + 1)
    expect(Number(await node.hget(k.meta, 'epoch'))).toBe(epochBefore + 1)
    expect(await node.hget(k.buyers, 'between')).not.toBeNull()
    expect(await node.hexists(k.status, `${PRODUCT}.between`)).toBe(1)
    expect(await node.get(k.stock)).toBe('9')
  } finally {
    direct.disconnect()
  }
})

it('a restock sent twice: its units added once, the epoch raised once', async () => {
  await preload(6, 1, 5)
  const epochBefore = Number(await node.hget(k.meta, 'epoch'))
  const reply = await resent(
    () => store.restock(PRODUCT, 6, 3, '9001'),
    async () => (await node.get(k.stock)) === '8',
  )
  expect(reply).toEqual({ epoch: epochBefore + 1, stock: 8, appliedNow: false })
  expect(await node.get(k.stock)).toBe('8')
  expect(await node.hget(k.meta, 'stock_total')).toBe('8')
  expect(Number(await node.hget(k.meta, 'epoch'))).toBe(epochBefore + 1)
})
