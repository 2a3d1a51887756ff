// Issue 37 item 1: a per-user limit above one, then a return (refund, cancel, failed payment), then
// more purchases. Before the fix reserve.lua numbered a user's unit `count + 1` while a return only
// lowered the count: after buying A (unit 1) and B (unit 2) and a refund of A, the next purchase was
// answered 200 with unit 2, and SQL's unique index on live units refused it (failed,
// duplicate_unit) — a 200 never delivered. Now a reservation takes the lowest unit number no live
// order of the user holds. Real Redis, real PostgreSQL, the app through inject() and the worker's
// own consumer, sink and returns in this process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { OrderStore } from '../../src/orders/order-store.js'
import { SqlSink } from '../../src/orders/sql-sink.js'
import { StreamConsumer } from '../../src/orders/stream-consumer.js'
import { UnitReturns } from '../../src/orders/unit-returns.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { eventually } from '../support/eventually.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'
const PRICE = 10 // currency units; the default wallet (100.00) pays 10

describe('unit numbers after returns, per-user limit above one', () => {
  let fx: InProcessApp
  let runtime: Runtime
  let app: App
  let worker: StreamConsumer
  const sales: string[] = []

  beforeAll(async () => {
    fx = await startInProcessApp('fs_units', {
      ADMIN_TOKEN: TOKEN,
      DURABILITY: 'none',
      DEFAULT_WALLET_BALANCE: '100.00',
    })
    runtime = fx.runtime
    app = fx.app
    const returns = new UnitReturns({ db: runtime.db, store: runtime.deps.store })
    const orders = new OrderStore(runtime.db, { defaultWalletCents: 100_00 })
    worker = new StreamConsumer({
      redis: runtime.redis,
      sink: new SqlSink({ orders, returns }),
      consumer: 'unit-numbers',
    })
    worker.start(async () => sales)
  }, 60_000)

  afterAll(async () => {
    await worker?.stop()
    await fx?.close()
  })

  const put = (id: string, body: object) =>
    app.inject({
      method: 'PUT',
      url: `/admin/sales/${id}`,
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: body,
    })
  const admin = (url: string) =>
    app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${TOKEN}` } })
  const buy = async (productId: string, userId: string) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/checkout',
      payload: { product_id: productId, user_id: userId },
    })
    return { status: res.statusCode, body: res.json() }
  }
  const sqlOrder = async (orderId: string) =>
    (
      await runtime.db.query<{ status: string; failure_reason: string | null }>(
        'SELECT status, failure_reason FROM orders WHERE order_id = $1',
        [orderId],
      )
    ).rows[0] ?? { status: 'not in SQL', failure_reason: null }
  /** The order once the worker has written it to SQL in the status wanted (or failed). */
  const settled = (orderId: string, status: string) =>
    eventually(
      () => sqlOrder(orderId),
      (o) => o.status === status || o.status === 'failed',
      { what: `order ${orderId} ${status} in SQL` },
    )
  const stock = async (productId: string) => Number(await runtime.redis.get(saleKeys(productId).stock))
  /** SQL's live orders of one user: at most the limit, and no unit number twice. */
  const live = async (productId: string, userId: string) =>
    (
      await runtime.db.query<{ unit_no: number; order_id: string }>(
        `SELECT unit_no, order_id FROM orders WHERE product_id = $1 AND user_id = $2
           AND status IN ('confirmed', 'reserved', 'paid') ORDER BY unit_no`,
        [productId, userId],
      )
    ).rows

  it('limit 2: buy A and B, refund A, buy C (200, confirmed), a fourth purchase is refused', async () => {
    sales.push('un1')
    expect((await put('un1', { stock: 10, price: PRICE, per_user_limit: 2 })).statusCode).toBe(200)
    const a = await buy('un1', 'u1')
    const b = await buy('un1', 'u1')
    expect([a.status, b.status]).toEqual([200, 200])
    expect(await settled(a.body.order_id, 'confirmed')).toEqual({ status: 'confirmed', failure_reason: null })
    expect(await settled(b.body.order_id, 'confirmed')).toEqual({ status: 'confirmed', failure_reason: null })
    expect(await stock('un1')).toBe(8)

    const refund = await admin(`/admin/orders/${a.body.order_id}/refund`)
    expect(refund.statusCode, refund.body).toBe(200)
    await eventually(
      () => stock('un1'),
      (s) => s === 9,
      { what: "A's unit back on sale" },
    )

    const c = await buy('un1', 'u1')
    expect(c.status).toBe(200)
    // The 200 ends live: confirmed in SQL, not failed duplicate_unit.
    expect(await settled(c.body.order_id, 'confirmed')).toEqual({ status: 'confirmed', failure_reason: null })
    const d = await buy('un1', 'u1')
    expect(d.status).toBe(409)
    expect(d.body.error.code).toBe('ALREADY_PURCHASED')
    expect([b.body.order_id, c.body.order_id]).toContain(d.body.error.order_id)
    expect(await live('un1', 'u1')).toEqual([
      { unit_no: 1, order_id: c.body.order_id },
      { unit_no: 2, order_id: b.body.order_id },
    ])
    // Charged for B and C, and for A once, refunded once.
    const wallet = await runtime.db.query(
      `SELECT charged_cents, refunded_cents FROM wallets WHERE user_id = 'u1'`,
    )
    expect(wallet.rows).toEqual([
      { charged_cents: String(3 * PRICE * 100), refunded_cents: String(PRICE * 100) },
    ])
  })

  it('limit 3: refunds of the first and the middle unit, then two purchases: each takes a free number', async () => {
    sales.push('un2')
    expect((await put('un2', { stock: 10, price: PRICE, per_user_limit: 3 })).statusCode).toBe(200)
    const first = [await buy('un2', 'u2'), await buy('un2', 'u2'), await buy('un2', 'u2')]
    expect(first.map((r) => r.status)).toEqual([200, 200, 200])
    for (const r of first) await settled(r.body.order_id, 'confirmed')
    const [x, y, z] = first.map((r) => r.body.order_id as string)
    for (const id of [x, y]) expect((await admin(`/admin/orders/${id}/refund`)).statusCode).toBe(200)
    await eventually(
      () => stock('un2'),
      (s) => s === 9,
      { what: 'two units back on sale' },
    )
    // Only z (unit 3) is live: count + 1 would give the next purchase unit 2, then unit 3 (z's).
    const p = await buy('un2', 'u2')
    const q = await buy('un2', 'u2')
    expect([p.status, q.status]).toEqual([200, 200])
    for (const r of [p, q])
      expect(await settled(r.body.order_id, 'confirmed')).toEqual({
        status: 'confirmed',
        failure_reason: null,
      })
    const refused = await buy('un2', 'u2')
    expect(refused.body.error.code).toBe('ALREADY_PURCHASED')
    expect([z, p.body.order_id, q.body.order_id]).toContain(refused.body.error.order_id)
    expect(await live('un2', 'u2')).toEqual([
      { unit_no: 1, order_id: p.body.order_id },
      { unit_no: 2, order_id: q.body.order_id },
      { unit_no: 3, order_id: z },
    ])
  })

  it('a hold sale, limit 2: a cancelled order frees its number for the next reservation, which is paid', async () => {
    sales.push('un3')
    expect(
      (await put('un3', { stock: 5, price: PRICE, per_user_limit: 2, payment: 'hold', hold_seconds: 600 }))
        .statusCode,
    ).toBe(200)
    const a = await buy('un3', 'u3')
    const b = await buy('un3', 'u3')
    for (const r of [a, b]) await settled(r.body.order_id, 'reserved')
    const cancel = await app.inject({
      method: 'POST',
      url: `/v1/orders/${a.body.order_id}/cancel`,
      payload: { user_id: 'u3' },
    })
    expect(cancel.statusCode, cancel.body).toBe(200)
    await eventually(
      () => stock('un3'),
      (s) => s === 4,
      { what: 'the cancelled unit back on sale' },
    )
    const c = await buy('un3', 'u3')
    expect(c.status).toBe(200)
    expect(await settled(c.body.order_id, 'reserved')).toEqual({ status: 'reserved', failure_reason: null })
    const pay = await app.inject({
      method: 'POST',
      url: `/v1/orders/${c.body.order_id}/pay`,
      payload: { user_id: 'u3' },
    })
    expect(pay.statusCode, pay.body).toBe(200)
    expect(await live('un3', 'u3')).toEqual([
      { unit_no: 1, order_id: c.body.order_id },
      { unit_no: 2, order_id: b.body.order_id },
    ])
  })
})
