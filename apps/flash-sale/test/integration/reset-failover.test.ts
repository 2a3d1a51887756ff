// Issue 37 item 8, with a real failover: a reset moved SQL to round 2, its preload ran on a master
// cut off from its replica (503 E_SALE_NOT_DURABLE to the admin), and that master was killed: the
// promoted replica never had the preload. Before, it sold round 1 with durable 200s that all ended
// `stale_round`. Now the reset's close (close-round.lua, confirmed on the replica before SQL
// moved) is on the promoted replica: it refuses (503) until the admin repeats the reset, whose
// round then sells. Real 3+3 Cluster, each node on its own loopback address, the master-replica
// link cut with iptables (partition e of partition-faults.ts), PostgreSQL for the rounds.
import { type NetworkFaults, type RedisCluster, startNetworkFaults, until } from '@kunci/topology'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { ackRoute, type RedisClient } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { ReplicaAcks } from '../../src/redis/replica-acks.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { currentRound, type SaleInput, writeSale } from '../../src/sql/sales.js'
import { LuaStrategy } from '../../src/strategies/lua.js'
import { createTestDatabase } from '../support/pg.js'
import { startSaleCluster } from '../support/sale-cluster.js'

const PRODUCT = 'rf1'
const SALE: SaleInput = {
  productId: PRODUCT,
  stock: 5,
  priceCents: 100,
  name: undefined,
  startsAt: undefined,
  endsAt: undefined,
  perUserLimit: 1,
}

let cluster: RedisCluster
let network: NetworkFaults
let client: RedisClient
let acks: ReplicaAcks
let store: SaleStore
let strategy: LuaStrategy
let db: Db
let dropDb: () => Promise<void>

beforeAll(async () => {
  const sc = await startSaleCluster({ nodeTimeoutMs: 1_000, distinctHosts: true })
  cluster = sc.cluster
  network = await startNetworkFaults({ name: 'reset-failover' })
  client = await sc.connect()
  acks = new ReplicaAcks(ackRoute(client, sc.config), { timeoutMs: 200 })
  store = new SaleStore(client, { acks })
  strategy = new LuaStrategy(store, { durability: 'replica' })
  const database = await createTestDatabase('fs_reset_failover')
  dropDb = database.drop
  db = connectDb(database.url, 2)
  await migrate(db)
}, 120_000)

afterAll(async () => {
  await network?.close()
  acks?.close()
  client?.disconnect()
  await db?.end()
  await dropDb?.()
  await cluster?.stop()
})

/** putSale's steps (sale/sale-admin.ts), so that the test can stop between them. */
const preload = (round: number) =>
  store.preload({
    productId: PRODUCT,
    round,
    stockTotal: SALE.stock,
    priceCents: SALE.priceCents,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: SALE.perUserLimit,
  })

it('a reset whose preload a failover dropped leaves the promoted master refusing, not selling the old round', async () => {
  expect((await writeSale(db, SALE)).round).toBe(1)
  await preload(1)
  expect(
    await strategy.checkout({ productId: PRODUCT, userId: 'a', idempotencyKey: undefined }),
  ).toMatchObject({
    ok: true,
    status: 'reserved',
  })

  // The reset: closed in Redis (confirmed), SQL at round 2; the preload on a master cut off.
  expect(await store.closeRound(PRODUCT, 2)).toBe('closed')
  expect((await writeSale(db, SALE)).round).toBe(2)
  const master = await cluster.slotOwner(keySlot(saleKeys(PRODUCT).meta))
  const replica = await cluster.replicaOf(master)
  if (!replica) throw new Error('no replica')
  const cut = await network.cut(master, replica)
  await expect(preload(2)).rejects.toMatchObject({ code: 'E_SALE_NOT_DURABLE' })
  await master.kill()
  await until(
    async () => (await cluster.masters()).some((m) => m === replica),
    'the replica promoted',
    60_000,
  )
  await cut.heal()

  // The promoted replica has the close and not the preload: it refuses, and sells nothing.
  let meta: Record<string, string> = {}
  await until(
    async () => {
      meta = await client.hgetall(saleKeys(PRODUCT).meta).catch(() => ({}))
      return meta.round !== undefined
    },
    'the client to read the sale on the promoted master',
    60_000,
  )
  expect(meta).toMatchObject({ round: '1', closing: '2' })
  const refused = await strategy.checkout({ productId: PRODUCT, userId: 'b', idempotencyKey: undefined })
  expect(refused).toMatchObject({ ok: false, code: 'UNAVAILABLE' })
  expect(refused.ok === false && refused.message).toMatch(/being reset/)
  expect(await client.get(saleKeys(PRODUCT).stock)).toBe('4')

  // The admin repeats the reset (503 told them to): round 3 closes SQL's round 2 and sells.
  await cluster.rejoin(master)
  const round = await currentRound(db, PRODUCT)
  expect(round).toBe(2)
  expect(await store.closeRound(PRODUCT, round! + 1)).toBe('closed')
  expect((await writeSale(db, SALE)).round).toBe(3)
  await preload(3)
  expect(
    await strategy.checkout({ productId: PRODUCT, userId: 'b', idempotencyKey: undefined }),
  ).toMatchObject({
    ok: true,
  })
  expect(await client.hget(saleKeys(PRODUCT).meta, 'round')).toBe('3')
}, 180_000)
