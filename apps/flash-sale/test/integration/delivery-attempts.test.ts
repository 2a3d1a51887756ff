// Issue 37 item 2: a replica paused while the worker restarts. The worker holds back what no
// replica confirmed, re-reading its own pending events every ~50 ms, and each re-read raised
// Redis's delivery counter; the next worker claimed them and dead-lettered orders answered 200 as
// "too many deliveries (a consumer died on it each time)". Now only a worker that died inside a
// persisting attempt counts (orders/delivery-attempts.ts). Real 3+3 Cluster, real PostgreSQL, the
// worker's consumer and SQL sink in this process, SIGSTOP/SIGCONT of the real replica.
import type { RedisCluster, RedisNode } from '@kunci/topology'
import { keySlot } from 'kunci'
import { Registry } from 'prom-client'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { createServiceMetrics } from '../../src/metrics/service-metrics.js'
import type { OrderSink, SinkEntry, SinkResult } from '../../src/orders/order-sink.js'
import { OrderStore } from '../../src/orders/order-store.js'
import { reconcile } from '../../src/orders/reconcile.js'
import { updateSaleGauges } from '../../src/orders/sale-gauges.js'
import { SqlSink } from '../../src/orders/sql-sink.js'
import { StreamConsumer } from '../../src/orders/stream-consumer.js'
import { ackRoute, type RedisClient } from '../../src/redis/connect.js'
import { attemptsKey, saleKeys, WORKER_GROUP } from '../../src/redis/keys.js'
import { isDurable, ReplicaAcks } from '../../src/redis/replica-acks.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { eventually } from '../support/eventually.js'
import { createTestDatabase } from '../support/pg.js'
import { startSaleCluster } from '../support/sale-cluster.js'

const ORDERS = 20
const MAX_DELIVERIES = 5

let cluster: RedisCluster
let client: RedisClient
let acks: ReplicaAcks
let db: Db
let drop: () => Promise<void>
let orders: OrderStore
const consumers: StreamConsumer[] = []

beforeAll(async () => {
  // A node timeout long enough that the paused replica is never flagged failed meanwhile (which
  // would show the master alone and end the hold-back).
  const sc = await startSaleCluster({ nodeTimeoutMs: 15_000 })
  cluster = sc.cluster
  client = await sc.connect()
  acks = new ReplicaAcks(ackRoute(client, sc.config), { timeoutMs: 200 })
  const t = await createTestDatabase('fs_attempts')
  drop = t.drop
  db = connectDb(t.url, 4)
  await migrate(db)
  orders = new OrderStore(db, { defaultWalletCents: 1_000_000 })
}, 90_000)

afterAll(async () => {
  for (const c of consumers) await c.stop().catch(() => {})
  acks?.close()
  client?.disconnect()
  await db?.end()
  await drop?.()
  await cluster?.stop()
})

/** A sale in SQL and Redis with ORDERS reservations in its stream, and its master's replica. */
async function saleWithOrders(productId: string): Promise<{ replica: RedisNode; ids: string[] }> {
  await db.query(`INSERT INTO products (product_id, name, price_cents) VALUES ($1, 'p', 100)`, [productId])
  await db.query(`INSERT INTO sales (product_id, round, stock_total) VALUES ($1, 1, $2)`, [productId, ORDERS])
  const store = new SaleStore(client)
  await store.preload({
    productId,
    round: 1,
    stockTotal: ORDERS,
    priceCents: 100,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: 1,
  })
  const ids: string[] = []
  for (let u = 0; u < ORDERS; u++) {
    const orderId = `${productId}.o${u}`
    const r = await store.reserve({
      productId,
      userId: `u${u}`,
      orderId,
      idempotencyKey: undefined,
      roomGen: '',
    })
    expect(r.code).toBe('RESERVED')
    ids.push(orderId)
  }
  const master = await cluster.slotOwner(keySlot(saleKeys(productId).orders))
  const replica = await cluster.replicaOf(master)
  if (!replica) throw new Error('the sale master has no replica')
  return { replica, ids }
}

function consumer(name: string, sink: OrderSink): StreamConsumer {
  const c = new StreamConsumer({
    redis: client,
    sink,
    consumer: name,
    acks,
    claimIdleMs: 500,
    maxDeliveries: MAX_DELIVERIES,
  })
  consumers.push(c)
  return c
}

/** Highest Redis delivery count among the sale's pending events (XPENDING's own counter). */
async function maxDeliveryCount(productId: string): Promise<number> {
  const rows = (await client.xpending(saleKeys(productId).orders, WORKER_GROUP, '-', '+', 1_000)) as [
    string,
    string,
    number,
    number,
  ][]
  return Math.max(0, ...rows.map((r) => Number(r[3])))
}

const statuses = async (productId: string) =>
  (
    await db.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM orders WHERE product_id = $1 GROUP BY status',
      [productId],
    )
  ).rows

it('events held back while the replica is paused, the worker restarted: every order persisted, none dead-lettered', async () => {
  const productId = 'att1'
  const { replica } = await saleWithOrders(productId)
  replica.pause()
  try {
    const first = consumer('w1', new SqlSink({ orders }))
    first.start(async () => [productId])
    // The worker reads the events and holds them back (no replica confirms them), reading them
    // again and again: Redis's own counter climbs well past the limit.
    await eventually(
      () => maxDeliveryCount(productId),
      (n) => n > 2 * MAX_DELIVERIES,
      { what: 'the held-back events re-read past the delivery limit' },
    )
    expect(await statuses(productId)).toEqual([])
    await first.stop()
  } finally {
    replica.resume()
  }
  // The replica back and caught up (a confirmation round shows it), the next worker (another
  // name) claims the events once they are idle, and may hand them on at once.
  const mark = saleKeys(productId).ackMark
  await eventually(
    async () => isDurable(await acks.confirmOutcome(mark, acks.nodeOf(mark))),
    (durable) => durable,
    { what: 'the replica confirms again' },
  )
  const second = consumer('w2', new SqlSink({ orders }))
  second.start(async () => [productId])
  await eventually(
    () => statuses(productId),
    (rows) => rows.length === 1 && rows[0]?.n === ORDERS,
    { what: 'every order persisted', timeoutMs: 60_000 },
  )
  expect(await statuses(productId)).toEqual([{ status: 'confirmed', n: ORDERS }])
  expect(await client.xlen(saleKeys(productId).dead)).toBe(0)
  await eventually(
    () => client.xpending(saleKeys(productId).orders, WORKER_GROUP) as Promise<[number, ...unknown[]]>,
    (p) => Number(p[0]) === 0,
    { what: 'every event acknowledged' },
  )
  expect(await client.hlen(attemptsKey(productId, WORKER_GROUP))).toBe(0)
  await second.stop()
})

/**
 * A worker that dies whenever the poison event is in its batch (the sink never answers: the
 * consumer is abandoned, as a process killed inside the attempt), and persists every other batch.
 */
class PoisonSink implements OrderSink {
  hung = false
  constructor(
    readonly poison: string,
    readonly inner: OrderSink,
  ) {}
  handle(entries: readonly SinkEntry[]): Promise<SinkResult[]> {
    if (entries.some((e) => e.event.orderId === this.poison)) {
      this.hung = true
      return new Promise(() => {})
    }
    return this.inner.handle(entries)
  }
}

it('a poison event among 20: workers die on it until it is dead-lettered with the count; the other 19 are persisted', async () => {
  const productId = 'att2'
  const { ids } = await saleWithOrders(productId)
  const poison = ids[7]!
  const others = () =>
    db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM orders WHERE product_id = $1 AND status = 'confirmed'`,
      [productId],
    )
  // Each worker runs until it dies on the poison event; the next claims what it left.
  let deaths = 0
  for (let w = 1; w <= 2 * MAX_DELIVERIES; w++) {
    const sink = new PoisonSink(poison, new SqlSink({ orders }))
    const c = new StreamConsumer({
      redis: client,
      sink,
      consumer: `poisoned-${w}`,
      acks,
      claimIdleMs: 500,
      maxDeliveries: MAX_DELIVERIES,
    })
    c.start(async () => [productId])
    const outcome = await eventually(
      async () =>
        sink.hung ? 'died' : (await client.xlen(saleKeys(productId).dead)) > 0 ? 'dead-lettered' : '',
      (o) => o !== '',
      { what: `worker ${w} dies or dead-letters the poison`, timeoutMs: 30_000 },
    )
    if (outcome === 'died') {
      deaths++
      continue
    }
    consumers.push(c)
    break
  }
  expect(deaths).toBe(MAX_DELIVERIES)
  await eventually(
    async () => (await others()).rows[0]!.n,
    (n) => n === ORDERS - 1,
    { what: 'every other order persisted' },
  )
  const dead = (await client.xrange(saleKeys(productId).dead, '-', '+')) as [string, string[]][]
  expect(dead).toHaveLength(1)
  const fields = dead[0]![1]
  expect(fields[fields.indexOf('order_id') + 1]).toBe(poison)
  expect(fields[fields.indexOf('deliveries') + 1]).toBe(String(MAX_DELIVERIES))
  await eventually(
    () => client.hlen(attemptsKey(productId, WORKER_GROUP)),
    (n) => n === 0,
    { what: 'no attempt left counted' },
  )
})

it('SQL down while the worker is killed and restarted: outages never count, every order persisted', async () => {
  const productId = 'att3'
  await saleWithOrders(productId)
  // A sink whose store is unreachable, several workers in a row that each meet the outage and die.
  const down = connectDb('postgres://nobody@127.0.0.1:1/none', 1)
  try {
    for (let w = 1; w <= MAX_DELIVERIES + 1; w++) {
      const outage = new SqlSink({ orders: new OrderStore(down) })
      const errors: unknown[] = []
      const c = new StreamConsumer({
        redis: client,
        sink: outage,
        consumer: `outage-${w}`,
        acks,
        claimIdleMs: 500,
        maxDeliveries: MAX_DELIVERIES,
        onError: (err) => errors.push(err),
      })
      c.start(async () => [productId])
      await eventually(
        async () => errors.length,
        (n) => n > 0,
        { what: `worker ${w} meets the outage`, timeoutMs: 30_000 },
      )
      await c.stop()
    }
  } finally {
    await down.end().catch(() => {})
  }
  expect(await client.hlen(attemptsKey(productId, WORKER_GROUP))).toBe(0)
  const healthy = consumer('w4', new SqlSink({ orders }))
  healthy.start(async () => [productId])
  await eventually(
    () => statuses(productId),
    (rows) => rows.length === 1 && rows[0]?.n === ORDERS,
    { what: 'every order persisted', timeoutMs: 60_000 },
  )
  expect(await client.xlen(saleKeys(productId).dead)).toBe(0)
})

it('reconcile names what broke a promise: dead-lettered events and orders failed for a reason not the buyer’s', async () => {
  // The books as reconcile reads them once nothing runs: the earlier tests' workers stopped.
  for (const c of consumers) await c.stop()
  const report = await reconcile(orders, client, new SaleStore(client))
  const problems = (id: string) => report.find((s) => s.product_id === id)?.problems ?? []
  // att1 and att3 ended sound; att2's poison event was dead-lettered.
  expect(problems('att1')).toEqual([])
  expect(problems('att3')).toEqual([])
  expect(problems('att2')).toContainEqual(expect.stringMatching(/^1 order event\(s\) dead-lettered/))
  // An order SQL failed as a second unit of its user: reserved, answered, never live.
  await db.query(
    `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, failure_reason, strategy, reserved_at)
       VALUES ('att1.planted', 'att1', 1, 'u0', 1, 100, 'failed', 'duplicate_unit', 'lua', now())`,
  )
  const again = await reconcile(orders, client, new SaleStore(client))
  expect(again.find((s) => s.product_id === 'att1')?.problems).toContainEqual(
    expect.stringMatching(/^1 order\(s\) reserved in Redis then failed duplicate_unit/),
  )
  // The worker's gauge says the same, for the alert FlashSaleOrdersNotKept (the drift equation
  // accounts for these, so its gauge stays 0).
  const metrics = createServiceMetrics(new Registry())
  await updateSaleGauges(client, async () => ['att1', 'att2', 'att3'], orders, metrics)
  const notKept = await metrics.notKept.get()
  const of = (id: string) => notKept.values.find((v) => v.labels.product_id === id)?.value
  expect([of('att1'), of('att2'), of('att3')]).toEqual([1, 1, 0])
})
