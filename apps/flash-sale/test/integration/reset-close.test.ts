// Issue 37 item 8: a reset moved SQL to the next round, and a Redis that did not take the preload
// (a failover dropped it, or the admin instance died before it ran) kept selling the old round:
// durable 200s that all ended `stale_round`. Now a reset closes the round in Redis first
// (close-round.lua, shown durable before SQL moves) and the preload opens the next one; in
// between, reservations answer 503 and keep nothing under the key.
//
// Through app.inject() on real Redis and PostgreSQL. The state "closed in Redis, SQL moved, no
// preload" is made with the same steps putSale takes, stopping where the failed reset stopped;
// reset-failover.test.ts makes it with a real failover that drops the preload.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { writeSale } from '../../src/sql/sales.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'
const SALE = { stock: 5, price: 10, per_user_limit: 1 }

describe('a reset closes the round before SQL moves', () => {
  let fx: InProcessApp
  let runtime: Runtime
  let app: App

  beforeAll(async () => {
    fx = await startInProcessApp('fs_reset_close', { ADMIN_TOKEN: TOKEN, DURABILITY: 'none' })
    runtime = fx.runtime
    app = fx.app
  }, 60_000)

  afterAll(async () => {
    await fx?.close()
  })

  const put = (id: string) =>
    app.inject({
      method: 'PUT',
      url: `/admin/sales/${id}`,
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: SALE,
    })
  const checkout = async (productId: string, userId: string, key?: string) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/checkout',
      headers: key ? { 'idempotency-key': key } : {},
      payload: { product_id: productId, user_id: userId },
    })
    const body = res.json() as { order_id?: string; error?: { code: string } }
    return {
      status: res.statusCode,
      code: body.error?.code,
      orderId: body.order_id,
      retryAfter: res.headers['retry-after'],
    }
  }
  const meta = (id: string) => runtime.redis.hgetall(saleKeys(id).meta)

  it('a reset that died after moving SQL leaves a sale that refuses (503) instead of selling the closed round', async () => {
    expect((await put('7001')).statusCode).toBe(200)
    expect(await checkout('7001', 'u1')).toMatchObject({ status: 200 })
    const before = await runtime.redis.get(saleKeys('7001').stock)

    // putSale's first two steps, then it "dies": the close, and SQL's new round; no preload.
    expect(await runtime.deps.store.closeRound('7001', 2)).toBe('closed')
    await writeSale(runtime.deps.db, {
      productId: '7001',
      stock: 5,
      priceCents: 1_000,
      name: undefined,
      startsAt: undefined,
      endsAt: undefined,
      perUserLimit: 1,
    })
    expect(await meta('7001')).toMatchObject({ round: '1', closing: '2' })

    // Keyless and keyed checkouts: 503 with Retry-After, nothing reserved, nothing kept under the key.
    expect(await checkout('7001', 'u2')).toMatchObject({ status: 503, code: 'UNAVAILABLE', retryAfter: '1' })
    expect(await checkout('7001', 'u3', 'key-3')).toMatchObject({ status: 503, code: 'UNAVAILABLE' })
    expect(await runtime.redis.get(saleKeys('7001').stock)).toBe(before)
    expect(await runtime.redis.hget(saleKeys('7001').idem, 'key-3')).toBeNull()
    expect(await runtime.redis.xlen(saleKeys('7001').orders)).toBe(1)

    // The admin repeats the PUT: SQL's round 2 is closed in its turn, round 3 opens and sells; the
    // key refused meanwhile gets the new round's answer.
    const again = await put('7001')
    expect(again.statusCode).toBe(200)
    expect(again.json()).toMatchObject({ round: 3 })
    expect(await meta('7001')).toMatchObject({ round: '3' })
    expect((await meta('7001')).closing).toBeUndefined()
    expect(await checkout('7001', 'u3', 'key-3')).toMatchObject({ status: 200 })
    expect(await checkout('7001', 'u2')).toMatchObject({ status: 200 })
  })

  it('a reset that completes closes and opens in one call; a new sale has nothing to close', async () => {
    expect((await put('7002')).statusCode).toBe(200)
    expect((await meta('7002')).closing).toBeUndefined()
    expect(await checkout('7002', 'u1')).toMatchObject({ status: 200 })
    const epoch = Number((await meta('7002')).epoch)
    const reset = await put('7002')
    expect(reset.json()).toMatchObject({ round: 2 })
    // The close and the preload each told the instances (two epochs).
    expect(Number((await meta('7002')).epoch)).toBe(epoch + 2)
    expect((await meta('7002')).closing).toBeUndefined()
    expect(await checkout('7002', 'u1')).toMatchObject({ status: 200 })
  })
})
