import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'

// The HTTP contract through app.inject(): what a client can send, and what it gets back. Real
// Redis (one node, no replica: durability none) and real PostgreSQL underneath.
describe('HTTP contract: bad input gets the right 4xx and code, never a 5xx', () => {
  let fx: InProcessApp
  let _runtime: Runtime
  let app: App

  beforeAll(async () => {
    fx = await startInProcessApp('fs_http', {
      ADMIN_TOKEN: TOKEN,
      DURABILITY: 'none',
    })
    _runtime = fx.runtime
    app = fx.app
    const put = (id: string, body: object) =>
      app.inject({
        method: 'PUT',
        url: `/admin/sales/${id}`,
        headers: { authorization: `Bearer ${TOKEN}` },
        payload: body,
      })
    expect((await put('9921', { stock: 5, price: 49.99, name: 'Batik shirt' })).statusCode).toBe(200)
    expect(
      (await put('later', { stock: 5, price: 1, starts_at: new Date(Date.now() + 3_600_000).toISOString() }))
        .statusCode,
    ).toBe(200)
    expect(
      (
        await put('over', {
          stock: 5,
          price: 1,
          starts_at: new Date(Date.now() - 7_200_000).toISOString(),
          ends_at: new Date(Date.now() - 3_600_000).toISOString(),
        })
      ).statusCode,
    ).toBe(200)
  }, 60_000)

  afterAll(async () => {
    await fx?.close()
  })

  const checkout = (
    payload: string,
    headers: Record<string, string> = { 'content-type': 'application/json' },
  ) => app.inject({ method: 'POST', url: '/v1/checkout', headers, payload })

  const badBodies: [name: string, payload: string, status: number, code: string, field?: string][] = [
    ['invalid JSON', '{bad', 400, 'INVALID_REQUEST', 'body'],
    ['empty body', '', 400, 'INVALID_REQUEST', 'body'],
    ['an array', '[]', 400, 'INVALID_REQUEST', 'body'],
    ['null', 'null', 400, 'INVALID_REQUEST', 'body'],
    ['a string', '"9921"', 400, 'INVALID_REQUEST', 'body'],
    ['no product_id', '{"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['product_id 0', '{"product_id":0,"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['product_id negative', '{"product_id":-5,"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['product_id fractional', '{"product_id":1.5,"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    [
      'product_id beyond 2^53',
      '{"product_id":18014398509481984,"user_id":1}',
      400,
      'INVALID_REQUEST',
      'product_id',
    ],
    ['product_id empty string', '{"product_id":"","user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['product_id with a dot', '{"product_id":"a.b","user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    [
      'product_id too long',
      `{"product_id":"${'x'.repeat(65)}","user_id":1}`,
      400,
      'INVALID_REQUEST',
      'product_id',
    ],
    ['product_id boolean', '{"product_id":true,"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['product_id object', '{"product_id":{"$gt":0},"user_id":1}', 400, 'INVALID_REQUEST', 'product_id'],
    ['no user_id', '{"product_id":9921}', 400, 'INVALID_REQUEST', 'user_id'],
    ['user_id null', '{"product_id":9921,"user_id":null}', 400, 'INVALID_REQUEST', 'user_id'],
    ['user_id with spaces', '{"product_id":9921,"user_id":"a b"}', 400, 'INVALID_REQUEST', 'user_id'],
    ['user_id NaN-like', '{"product_id":9921,"user_id":1e400}', 400, 'INVALID_REQUEST', 'user_id'],
    [
      'body over 1 KiB',
      `{"product_id":9921,"user_id":1,"pad":"${'x'.repeat(2_000)}"}`,
      413,
      'PAYLOAD_TOO_LARGE',
    ],
    ['unknown product', '{"product_id":123456,"user_id":1}', 404, 'UNKNOWN_PRODUCT'],
    ['sale not started', '{"product_id":"later","user_id":1}', 409, 'SALE_NOT_STARTED'],
    ['sale ended', '{"product_id":"over","user_id":1}', 409, 'SALE_ENDED'],
  ]

  it.each(badBodies)('POST /v1/checkout with %s → %i %s', async (_name, payload, status, code, field) => {
    const res = await checkout(payload)
    expect(res.statusCode).toBe(status)
    expect(res.headers['content-type']).toMatch(/^application\/json/)
    const body = res.json()
    expect(body.error.code).toBe(code)
    expect(typeof body.error.message).toBe('string')
    if (field) expect(body.error.field).toBe(field)
  })

  const badHeaders: [name: string, headers: Record<string, string>, status: number, code: string][] = [
    ['text/plain', { 'content-type': 'text/plain' }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['form encoded', { 'content-type': 'application/x-www-form-urlencoded' }, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['no content type', {}, 415, 'UNSUPPORTED_MEDIA_TYPE'],
    [
      'Idempotency-Key with a space',
      { 'content-type': 'application/json', 'idempotency-key': 'a b' },
      400,
      'INVALID_REQUEST',
    ],
    [
      'Idempotency-Key of 129 characters',
      { 'content-type': 'application/json', 'idempotency-key': 'k'.repeat(129) },
      400,
      'INVALID_REQUEST',
    ],
  ]

  it.each(badHeaders)('POST /v1/checkout with %s → %i %s', async (_name, headers, status, code) => {
    const res = await checkout('{"product_id":9921,"user_id":77}', headers)
    expect(res.statusCode).toBe(status)
    expect(res.json().error.code).toBe(code)
  })

  it('accepts what a client may send: a charset, string ids, extra fields, an Idempotency-Key', async () => {
    const res = await checkout('{"product_id":"9921","user_id":"u-42","coupon":"x"}', {
      'content-type': 'application/json; charset=utf-8',
      'idempotency-key': 'order-u-42-1',
    })
    expect(res.statusCode).toBe(200)
    expect(res.json()).toMatchObject({ status: 'reserved', product_id: '9921', user_id: 'u-42' })
    expect(res.json().order_id).toMatch(/^9921\./)
  })

  const otherRoutes: [
    method: 'GET' | 'PUT' | 'POST',
    url: string,
    status: number,
    code: string,
    auth?: string,
    payload?: object,
  ][] = [
    ['GET', '/v1/orders/not-an-order', 404, 'UNKNOWN_ORDER'],
    ['GET', '/v1/orders/9921.doesnotexist', 404, 'UNKNOWN_ORDER'],
    ['GET', '/v1/products/a.b', 400, 'INVALID_REQUEST'],
    ['GET', '/v1/products/nosuch', 404, 'UNKNOWN_PRODUCT'],
    ['GET', '/v1/nothing-here', 404, 'NOT_FOUND'],
    ['GET', '/admin/sales/9921', 401, 'UNAUTHORIZED'],
    ['GET', '/admin/sales/9921', 401, 'UNAUTHORIZED', 'Bearer wrong-token'],
    ['GET', '/admin/sales/9921', 401, 'UNAUTHORIZED', TOKEN],
    ['GET', '/admin/sales/nosuch', 404, 'UNKNOWN_PRODUCT', `Bearer ${TOKEN}`],
    ['PUT', '/admin/sales/9921', 400, 'INVALID_REQUEST', `Bearer ${TOKEN}`, { stock: -1, price: 1 }],
    ['PUT', '/admin/sales/9921', 400, 'INVALID_REQUEST', `Bearer ${TOKEN}`, { stock: 10, price: 1.234 }],
    ['PUT', '/admin/sales/9921', 400, 'INVALID_REQUEST', `Bearer ${TOKEN}`, { stock: 10 }],
    [
      'PUT',
      '/admin/sales/9921',
      400,
      'INVALID_REQUEST',
      `Bearer ${TOKEN}`,
      { stock: 10, price: 1, per_user_limit: 0 },
    ],
    [
      'PUT',
      '/admin/sales/9921',
      400,
      'INVALID_REQUEST',
      `Bearer ${TOKEN}`,
      { stock: 10, price: 1, name: '' },
    ],
    [
      'PUT',
      '/admin/sales/9921',
      400,
      'INVALID_REQUEST',
      `Bearer ${TOKEN}`,
      { stock: 10, price: 1, starts_at: 'tomorrow' },
    ],
    [
      'PUT',
      '/admin/sales/9921',
      400,
      'INVALID_REQUEST',
      `Bearer ${TOKEN}`,
      { stock: 10, price: 1, starts_at: '2026-12-02T00:00:00Z', ends_at: '2026-12-01T00:00:00Z' },
    ],
  ]

  it.each(otherRoutes)('%s %s → %i %s', async (method, url, status, code, auth, payload) => {
    const res = await app.inject({ method, url, headers: auth ? { authorization: auth } : {}, payload })
    expect(res.statusCode).toBe(status)
    expect(res.json().error.code).toBe(code)
  })

  it('answers the refusals of a sale with their codes: ALREADY_PURCHASED carries the order, SOLD_OUT after the stock', async () => {
    const first = await checkout('{"product_id":9921,"user_id":1001}')
    expect(first.statusCode).toBe(200)
    const again = await checkout('{"product_id":9921,"user_id":1001}')
    expect(again.statusCode).toBe(409)
    expect(again.json().error).toMatchObject({ code: 'ALREADY_PURCHASED', order_id: first.json().order_id })
    // 5 units: u-42 and 1001 bought; three more, then sold out.
    for (const u of [1002, 1003, 1004])
      expect((await checkout(`{"product_id":9921,"user_id":${u}}`)).statusCode).toBe(200)
    const late = await checkout('{"product_id":9921,"user_id":1005}')
    expect(late.statusCode).toBe(409)
    expect(late.json().error.code).toBe('SOLD_OUT')
    const product = await app.inject({ method: 'GET', url: '/v1/products/9921' })
    expect(product.json()).toEqual({
      product_id: '9921',
      name: 'Batik shirt',
      price: 49.99,
      remaining_stock: 0,
    })
  })

  it('a sale SQL knows that the answering Redis node does not (a cut-off master after a failover) is 503, not 404', async () => {
    const put = await app.inject({
      method: 'PUT',
      url: '/admin/sales/stale',
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: { stock: 5, price: 1 },
    })
    expect(put.statusCode).toBe(200)
    // What a master cut off before the sale was opened on the promoted replica holds: nothing of it.
    const redis = new Redis({ host: fx.node.host, port: fx.node.port, lazyConnect: true })
    try {
      const k = saleKeys('stale')
      expect(await redis.del(k.meta, k.stock)).toBe(2)
    } finally {
      redis.disconnect()
    }
    // A burst first, before SQL's yes is remembered: every checkout of it shares the one question
    // (when each asked on its own, those beyond 4 at once were answered 404 without asking).
    const burst = await Promise.all(
      Array.from({ length: 20 }, (_, i) => checkout(`{"product_id":"stale","user_id":${3001 + i}}`)),
    )
    expect(burst.map((r) => `${r.statusCode} ${r.json().error?.code}`)).toEqual(
      Array.from({ length: 20 }, () => '503 UNAVAILABLE'),
    )
    for (const user of [2001, 2002]) {
      const res = await checkout(`{"product_id":"stale","user_id":${user}}`)
      expect(res.statusCode).toBe(503)
      expect(res.json().error.code).toBe('UNAVAILABLE')
      expect(res.headers['retry-after']).toBe('1')
    }
    // A product neither knows is still 404.
    const none = await checkout('{"product_id":"nowhere","user_id":2001}')
    expect(none.statusCode).toBe(404)
    expect(none.json().error.code).toBe('UNKNOWN_PRODUCT')
  })
})
