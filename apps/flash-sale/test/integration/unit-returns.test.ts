// A unit given back once, however often its order's event is delivered (issue 16): the worker's
// sink on a real Redis and PostgreSQL. A worker that died between the SQL commit and the return
// (played by a sink without returns: the commit happens, the return does not) leaves the order
// failed with its return pending; the redelivered event returns the unit; later deliveries and
// resumePending() return nothing more.
import { afterAll, beforeAll, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { parseOrderEvent } from '../../src/orders/order-event.js'
import { OrderStore } from '../../src/orders/order-store.js'
import { SqlSink } from '../../src/orders/sql-sink.js'
import type { SinkEntry } from '../../src/orders/stream-consumer.js'
import { UnitReturns } from '../../src/orders/unit-returns.js'
import type { RedisClient } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { type OneNode, startOneNode } from '../support/one-node.js'
import { createTestDatabase } from '../support/pg.js'

let one: OneNode
let redis: RedisClient
let db: Db
let drop: () => Promise<void>

beforeAll(async () => {
  one = await startOneNode()
  redis = one.redis
  const t = await createTestDatabase('fs_returns')
  drop = t.drop
  db = connectDb(t.url, 4)
  await migrate(db)
}, 60_000)

afterAll(async () => {
  await db?.end()
  await drop?.()
  await one?.stop()
})

it('a redelivered event returns its unit once; a worker killed between the commit and the return loses nothing', async () => {
  const store = new SaleStore(redis)
  const orders = new OrderStore(db, { defaultWalletCents: 0 })
  const returned: string[] = []
  const returns = new UnitReturns({ db, store, onReturned: (_p, reason) => returned.push(reason) })
  await db.query(`INSERT INTO products (product_id, name, price_cents) VALUES ('u1', 'p', 1000)`)
  await db.query(`INSERT INTO sales (product_id, round, stock_total) VALUES ('u1', 1, 3)`)
  await store.preload({
    productId: 'u1',
    round: 1,
    stockTotal: 3,
    priceCents: 1000,
    startsAtMs: 0,
    endsAtMs: 0,
    perUserLimit: 1,
  })
  // A user with an empty wallet reserves the unit in Redis, as a checkout does.
  const reply = await store.reserve({
    productId: 'u1',
    userId: 'broke',
    orderId: 'u1.broke-1',
    idempotencyKey: undefined,
    roomGen: '',
  })
  expect(reply).toMatchObject({ code: 'RESERVED', remaining: 2 })
  const entries = (await redis.xrange(saleKeys('u1').orders, '-', '+')) as [string, string[]][]
  const batch: SinkEntry[] = entries.map(([id, fields]) => ({
    id,
    fields,
    event: parseOrderEvent('u1', id, fields),
  }))
  // The worker that dies after the commit: the order is failed, its unit given up in SQL only.
  const dying = new SqlSink({ orders })
  expect(await dying.handle(batch)).toEqual([{ kind: 'settled', status: 'failed' }])
  const pending = await db.query(
    `SELECT status, failure_reason, unit_return FROM orders WHERE order_id = 'u1.broke-1'`,
  )
  expect(pending.rows[0]).toEqual({
    status: 'failed',
    failure_reason: 'INSUFFICIENT_FUNDS',
    unit_return: 'pending',
  })
  expect(await redis.get(saleKeys('u1').stock)).toBe('2')
  // The event is delivered again (claimed by another worker): the unit comes back, once.
  const next = new SqlSink({ orders, returns })
  expect(await next.handle(batch)).toEqual([{ kind: 'settled', status: 'failed' }])
  expect(returned).toEqual(['INSUFFICIENT_FUNDS'])
  expect(await redis.get(saleKeys('u1').stock)).toBe('3')
  // And again, and the periodic resume: nothing more comes back.
  expect(await next.handle(batch)).toEqual([{ kind: 'settled', status: 'failed' }])
  expect(await returns.resumePending('u1')).toBe(0)
  expect(
    await returns.give('u1', [
      { orderId: 'u1.broke-1', userId: 'broke', round: 1, reason: 'INSUFFICIENT_FUNDS' },
    ]),
  ).toBe(0)
  expect(returned).toEqual(['INSUFFICIENT_FUNDS'])
  expect(await redis.get(saleKeys('u1').stock)).toBe('3')
  const books = await db.query(
    `SELECT (SELECT returned FROM sales WHERE product_id = 'u1') AS returned,
            (SELECT unit_return FROM orders WHERE order_id = 'u1.broke-1') AS unit_return`,
  )
  expect(books.rows[0]).toEqual({ returned: 1, unit_return: 'done' })
  expect(await redis.hlen(saleKeys('u1').returned)).toBe(1)
  // The buyer may buy again (the unit left their buyer record), and the status says failed.
  expect(await redis.hget(saleKeys('u1').buyers, 'broke')).toBeNull()
  expect((await store.orderStatus('u1', 'u1.broke-1'))?.status).toBe('failed')
})
