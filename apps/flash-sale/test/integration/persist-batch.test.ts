// The worker's batched persistence (issue 15) on real PostgreSQL: OrderStore.persistBatch writes a
// batch of one sale's events in one transaction with exactly persistReserved's outcomes, event by
// event; SqlSink falls back to one event at a time when the batch's transaction fails, so a poison
// event fails alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import type { OrderEvent } from '../../src/orders/order-event.js'
import { OrderStore } from '../../src/orders/order-store.js'
import { SqlSink } from '../../src/orders/sql-sink.js'
import { createTestDatabase } from '../support/pg.js'

let db: Db
let drop: () => Promise<void>
let orders: OrderStore

async function newSale(productId: string, stock: number, round = 1): Promise<void> {
  await db.query(`INSERT INTO products (product_id, name, price_cents) VALUES ($1, 'p', 1000)`, [productId])
  await db.query(`INSERT INTO sales (product_id, round, stock_total) VALUES ($1, $2, $3)`, [
    productId,
    round,
    stock,
  ])
}

function events(productId: string, n: number, from = 1, round = 1): OrderEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    orderId: `${productId}.o${from + i}`,
    productId,
    userId: `${productId}-u${from + i}`,
    round,
    unit: 1,
    priceCents: 1000,
    reservedAtMs: Date.now(),
  }))
}

async function books(productId: string) {
  const r = await db.query<{
    confirmed: number
    failed: number
    payments: number
    sold: number
    charged: string
  }>(
    `SELECT (SELECT count(*)::int FROM orders WHERE product_id = $1 AND status = 'confirmed') AS confirmed,
            (SELECT count(*)::int FROM orders WHERE product_id = $1 AND status = 'failed') AS failed,
            (SELECT count(*)::int FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1) AS payments,
            (SELECT sold FROM sales WHERE product_id = $1) AS sold,
            (SELECT coalesce(sum(w.charged_cents), 0) FROM wallets w WHERE w.user_id IN
               (SELECT user_id FROM orders WHERE product_id = $1)) AS charged`,
    [productId],
  )
  return { ...r.rows[0]!, charged: Number(r.rows[0]!.charged) }
}

beforeAll(async () => {
  const t = await createTestDatabase('fs_batch')
  drop = t.drop
  db = connectDb(t.url, 4)
  await migrate(db)
  // Every user can pay (the money rules have their own tests: wallet-*.test.ts).
  orders = new OrderStore(db, { defaultWalletCents: 1_000_000 })
})

afterAll(async () => {
  await db?.end()
  await drop?.()
})

describe('OrderStore.persistBatch', () => {
  it('300 events for 100 units: the first 100 in stream order confirmed, 200 sold out in SQL; one payment each', async () => {
    await newSale('b1', 100)
    const batch = events('b1', 300)
    const outcomes = await orders.persistBatch(batch, 'lua')
    expect(outcomes.slice(0, 100).every((o) => o.kind === 'confirmed')).toBe(true)
    expect(outcomes.slice(100)).toEqual(Array(200).fill({ kind: 'failed', reason: 'sold_out_in_sql' }))
    expect(await books('b1')).toEqual({
      confirmed: 100,
      failed: 200,
      payments: 100,
      sold: 100,
      charged: 100_000,
    })
  })

  it('a batch delivered again changes nothing and answers each event as a duplicate with its status', async () => {
    const again = await orders.persistBatch(events('b1', 300), 'lua')
    expect(again.slice(0, 100)).toEqual(Array(100).fill({ kind: 'duplicate', status: 'confirmed' }))
    expect(again.slice(100)).toEqual(Array(200).fill({ kind: 'duplicate', status: 'failed' }))
    expect(await books('b1')).toEqual({
      confirmed: 100,
      failed: 200,
      payments: 100,
      sold: 100,
      charged: 100_000,
    })
  })

  it('the same outcomes as persistReserved event by event: stale round, the same unit twice, a user buying twice', async () => {
    await newSale('b2', 10, 2)
    const stale = events('b2', 2, 1, 1) // round 1 of a sale now in round 2
    const twice = { ...events('b2', 1, 10, 2)[0]!, orderId: 'b2.second' }
    const mixed = [...stale, ...events('b2', 3, 10, 2), twice]
    const outcomes = await orders.persistBatch(mixed, 'lua')
    expect(outcomes).toEqual([
      { kind: 'failed', reason: 'stale_round' },
      { kind: 'failed', reason: 'stale_round' },
      { kind: 'confirmed' },
      { kind: 'confirmed' },
      { kind: 'confirmed' },
      { kind: 'failed', reason: 'duplicate_unit' },
    ])
    // One at a time, persistReserved gives the same answers for the same story on a fresh sale.
    await newSale('b3', 10, 2)
    const alike = mixed.map((e) => ({
      ...e,
      productId: 'b3',
      orderId: e.orderId.replace('b2', 'b3'),
      userId: e.userId.replace('b2', 'b3'),
    }))
    const single = []
    for (const e of alike) single.push(await orders.persistReserved(e, 'lua'))
    expect(single).toEqual(outcomes)
    expect(await books('b3')).toEqual(await books('b2'))
  })

  it('two workers persisting overlapping batches of one sale at once: every order once, never over the stock', async () => {
    await newSale('b4', 500)
    const all = events('b4', 800)
    const [a, b] = await Promise.all([
      orders.persistBatch(all.slice(0, 500), 'lua'),
      orders.persistBatch(all.slice(300), 'lua'),
    ])
    const confirmedIds = new Set<string>()
    for (const [i, o] of a.entries()) if (o.kind === 'confirmed') confirmedIds.add(all[i]!.orderId)
    for (const [i, o] of b.entries()) if (o.kind === 'confirmed') confirmedIds.add(all[300 + i]!.orderId)
    const facts = await books('b4')
    expect(facts.confirmed).toBe(500)
    expect(confirmedIds.size).toBe(500)
    expect(facts).toMatchObject({ payments: 500, sold: 500, charged: 500_000 })
  })
})

describe('SqlSink', () => {
  it('a poison event fails alone: the rest of its batch is persisted', async () => {
    await newSale('b5', 50)
    const batch = events('b5', 20)
    // unit_no beyond PostgreSQL's integer: parsed fine, refused by SQL (the whole batch's transaction fails).
    batch[7] = { ...batch[7]!, unit: 3_000_000_000 }
    const sink = new SqlSink({ orders })
    const results = await sink.handle(batch.map((event, i) => ({ id: `1-${i}`, fields: [], event })))
    expect(results[7]?.kind).toBe('error')
    expect(results.filter((r) => r.kind === 'settled')).toHaveLength(19)
    expect(await books('b5')).toMatchObject({ confirmed: 19, payments: 19, sold: 19 })
  })
})
