// Issue 37 item 5: a final refusal (SOLD_OUT, SALE_ENDED) recorded under an Idempotency-Key was
// answered at once, on a master that could be cut off from its replica and about to be deposed:
// after the failover the promoted master still had the units the deposed one had reserved as 202s,
// and 30 keys first answered 409 SOLD_OUT got 200 on a retry with the same key. Now such a record
// is answered only once a confirmation round shows it durable; otherwise 503 (retry with the same
// key). Real 3+3 Cluster, the replica paused with SIGSTOP (the master cannot show durability and
// is not alone: the node timeout is long), the service's store and lua strategy in this process.
import type { RedisCluster, RedisNode } from '@kunci/topology'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ackRoute, type RedisClient } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { isDurable, ReplicaAcks } from '../../src/redis/replica-acks.js'
import { SaleSnapshots } from '../../src/sale/sale-snapshots.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { LuaStrategy } from '../../src/strategies/lua.js'
import { eventually } from '../support/eventually.js'
import { startSaleCluster } from '../support/sale-cluster.js'

let cluster: RedisCluster
let client: RedisClient
let acks: ReplicaAcks
let store: SaleStore
let strategy: LuaStrategy
let access: Parameters<typeof ackRoute>[1]

beforeAll(async () => {
  const sc = await startSaleCluster({ nodeTimeoutMs: 15_000 })
  cluster = sc.cluster
  client = await sc.connect()
  access = sc.config
  acks = new ReplicaAcks(ackRoute(client, sc.config), { timeoutMs: 200 })
  store = new SaleStore(client, { acks })
  strategy = new LuaStrategy(store, { durability: 'replica' })
}, 90_000)

afterAll(async () => {
  acks?.close()
  client?.disconnect()
  await cluster?.stop()
})

async function soldOutSale(productId: string): Promise<RedisNode> {
  await store.preload({
    productId,
    round: 1,
    stockTotal: 2,
    priceCents: 100,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: 1,
  })
  for (const u of ['a', 'b']) {
    const r = await strategy.checkout({ productId, userId: u, idempotencyKey: undefined })
    expect(r).toMatchObject({ ok: true, status: 'reserved' })
  }
  const master = await cluster.slotOwner(keySlot(saleKeys(productId).meta))
  const replica = await cluster.replicaOf(master)
  if (!replica) throw new Error('no replica')
  return replica
}

const durableAgain = (productId: string) => {
  const mark = saleKeys(productId).ackMark
  return eventually(
    async () => isDurable(await acks.confirmOutcome(mark, acks.nodeOf(mark))),
    (d) => d,
    { what: 'the replica confirms again' },
  )
}

it('a keyed SOLD_OUT on a master that cannot show a replica holds it: 503, then 409 once it can', async () => {
  const productId = 'kr1'
  const replica = await soldOutSale(productId)
  replica.pause()
  try {
    const first = await strategy.checkout({ productId, userId: 'k1', idempotencyKey: 'key-1' })
    expect(first).toMatchObject({ ok: false, code: 'UNAVAILABLE' })
    // The same key again, still unconfirmed: still no final answer.
    const again = await strategy.checkout({ productId, userId: 'k1', idempotencyKey: 'key-1' })
    expect(again).toMatchObject({ ok: false, code: 'UNAVAILABLE' })
    // A keyless refusal records nothing and promises nothing: answered at once.
    const keyless = await strategy.checkout({ productId, userId: 'k2', idempotencyKey: undefined })
    expect(keyless).toMatchObject({ ok: false, code: 'SOLD_OUT' })
  } finally {
    replica.resume()
  }
  await durableAgain(productId)
  const final = await strategy.checkout({ productId, userId: 'k1', idempotencyKey: 'key-1' })
  expect(final).toMatchObject({ ok: false, code: 'SOLD_OUT' })
})

// Issue 41: beside a CPU-bound process, 503s "cannot show yet that this answer is kept" came
// seconds after a failover had healed: WAIT's short timeout ran out on a replica that was only slow,
// the node was marked short of replicas, and every keyed refusal was answered 503 at once until the
// next probe. Forced here: the replica is paused when the refusal's round goes out and resumed the
// moment that round is answered unconfirmed; the same checkout then waits for a later round.
it('a keyed SOLD_OUT whose first round found the replica slow waits for a later round: 409, not 503', async () => {
  const productId = 'kr4'
  const replica = await soldOutSale(productId)
  let unconfirmed = 0
  const slowAcks = new ReplicaAcks(ackRoute(client, access), {
    timeoutMs: 200,
    onOutcome: (outcome) => {
      if (isDurable(outcome)) return
      unconfirmed++
      replica.resume()
    },
  })
  try {
    const slowStore = new SaleStore(client, { acks: slowAcks })
    const slow = new LuaStrategy(slowStore, { durability: 'replica' })
    replica.pause()
    const r = await slow.checkout({ productId, userId: 'k5', idempotencyKey: 'key-5' })
    // The first round was answered unconfirmed (the replica paused), and yet the answer is final.
    expect(unconfirmed).toBeGreaterThan(0)
    expect(r).toMatchObject({ ok: false, code: 'SOLD_OUT' })
  } finally {
    replica.resume()
    slowAcks.close()
  }
})

it("a snapshot's refusal recorded under a key (refuse.lua) is no final answer until it is shown durable", async () => {
  const productId = 'kr2'
  const replica = await soldOutSale(productId)
  const epoch = Number(await client.hget(saleKeys(productId).meta, 'epoch'))
  const refuse = () =>
    store.refuse({ productId, epoch, userId: 'k3', idempotencyKey: 'key-3', code: 'SOLD_OUT', orderId: '' })
  replica.pause()
  try {
    expect(await refuse()).toMatchObject({ code: 'SOLD_OUT', durable: false })
  } finally {
    replica.resume()
  }
  await durableAgain(productId)
  expect(await refuse()).toMatchObject({ code: 'SOLD_OUT', durable: true, replayed: true })
})

it("the refusal lane's keyed answer from a snapshot (recordRefusal) is 503 until its record is shown durable", async () => {
  const productId = 'kr3'
  const snapshots = new SaleSnapshots(store)
  const lane = new LuaStrategy(store, { durability: 'replica', snapshots })
  await store.preload({
    productId,
    round: 1,
    stockTotal: 1,
    priceCents: 100,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: 1,
  })
  expect(await lane.checkout({ productId, userId: 'a', idempotencyKey: undefined })).toMatchObject({
    ok: true,
  })
  // The sale is sold out and its snapshot loaded: keyless checkouts are answered from memory.
  await eventually(
    async () => lane.answerFromMemory({ productId, userId: 'x', idempotencyKey: undefined }),
    (a) => a?.code === 'SOLD_OUT',
    { what: 'the snapshot answers' },
  )
  const replica = (await cluster.replicaOf(await cluster.slotOwner(keySlot(saleKeys(productId).meta))))!
  replica.pause()
  try {
    const unkept = await lane.recordRefusal({ productId, userId: 'k4', idempotencyKey: 'key-4' })
    expect(unkept).toMatchObject({ code: 'UNAVAILABLE' })
  } finally {
    replica.resume()
  }
  await durableAgain(productId)
  const kept = await lane.recordRefusal({ productId, userId: 'k4', idempotencyKey: 'key-4' })
  expect(kept).toMatchObject({ code: 'SOLD_OUT' })
})
