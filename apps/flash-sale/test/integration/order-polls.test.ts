// GET /v1/orders/:id after what a failover, a reset or a late settle leaves (issue 37): a 202
// whose reservation a failover dropped ended in UNKNOWN_ORDER for ever; now it is 409
// ORDER_PENDING while it may still appear (pay and cancel too: a 404 there was taken as final for
// orders a reset left on their way to SQL, fault generator seed 1161196802), and once older than
// ORDER_LOST_AFTER_MS it is `failed` with failure_reason `not_kept` (nothing charged, buy again).
// And a stale final status in Redis (confirmed, written by a settle that ran after a refund) no
// longer beats SQL's. The app through inject() on one real Redis node and real PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { saleKeys } from '../../src/redis/keys.js'
import { ORDER_LOST_AFTER_MS } from '../../src/routes/orders.js'
import type { Runtime } from '../../src/runtime.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'

describe('order polls', () => {
  let fx: InProcessApp
  let runtime: Runtime
  let app: App

  beforeAll(async () => {
    fx = await startInProcessApp('fs_polls', { ADMIN_TOKEN: TOKEN, DURABILITY: 'none' })
    runtime = fx.runtime
    app = fx.app
    const put = await app.inject({
      method: 'PUT',
      url: '/admin/sales/op1',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: { stock: 10, price: 1 },
    })
    expect(put.statusCode).toBe(200)
  }, 60_000)

  afterAll(async () => {
    fx?.node.resume()
    await fx?.close()
  })

  const get = (orderId: string) => app.inject({ method: 'GET', url: `/v1/orders/${orderId}` })
  /** An order id as newOrderId makes them, made `ageMs` ago. */
  const idMadeAgo = (ageMs: number) => `op1.${(Date.now() - ageMs).toString(36)}AAAAAAAAAAAA`

  it('a reservation no node and no row holds: ORDER_PENDING while young, failed not_kept once older than the bound', async () => {
    // A real reservation, then what the promoted replica lacks: its status and its event.
    const res = await app.inject({
      method: 'POST',
      url: '/v1/checkout',
      payload: { product_id: 'op1', user_id: 'u1' },
    })
    expect(res.statusCode).toBe(200)
    const orderId = res.json().order_id as string
    const k = saleKeys('op1')
    await runtime.redis.hdel(k.status, orderId)
    // Young: it may still appear (the worker holding it back, a reset under way): not final.
    const young = await get(orderId)
    expect(young.statusCode).toBe(409)
    expect(young.json().error.code).toBe('ORDER_PENDING')
    expect(young.headers['retry-after']).toBe('1')
    const pay = await app.inject({
      method: 'POST',
      url: `/v1/orders/${orderId}/pay`,
      payload: { user_id: 'u1' },
    })
    expect(pay.json().error.code).toBe('ORDER_PENDING')
    const old = await get(idMadeAgo(ORDER_LOST_AFTER_MS + 5_000))
    expect(old.statusCode).toBe(200)
    expect(old.json()).toMatchObject({ status: 'failed', failure_reason: 'not_kept', product_id: 'op1' })
    // An order id of a product without a sale stays unknown.
    const other = await get(`nosale.${(Date.now() - ORDER_LOST_AFTER_MS - 5_000).toString(36)}AAAAAAAAAAAA`)
    expect(other.json().error.code).toBe('UNKNOWN_ORDER')
  })

  it('Redis unreachable: 503, never failed', async () => {
    fx.node.pause()
    try {
      const res = await get(idMadeAgo(ORDER_LOST_AFTER_MS + 5_000))
      expect(res.statusCode).toBe(503)
    } finally {
      fx.node.resume()
    }
  })

  it("SQL's refunded beats Redis's confirmed written by a late settle", async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/checkout',
      payload: { product_id: 'op1', user_id: 'u2' },
    })
    const orderId = res.json().order_id as string
    const round = (await runtime.db.query('SELECT round FROM sales WHERE product_id = $1', ['op1'])).rows[0]
      .round
    // The worker's commit as it writes it, then a refund in SQL, then the worker's settle in Redis.
    await runtime.db.query(
      `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at, ended_at)
         VALUES ($1, 'op1', $2, 'u2', 1, 100, 'refunded', 'lua', now(), now())`,
      [orderId, round],
    )
    await runtime.redis.hset(saleKeys('op1').status, orderId, `confirmed|u2|${round}`)
    expect((await get(orderId)).json()).toMatchObject({ status: 'refunded' })
  })
})
