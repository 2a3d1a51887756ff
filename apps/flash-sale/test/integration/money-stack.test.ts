// Issue 16 end to end on the lua strategy: 2 service processes, a worker, a 3+3 Redis Cluster and
// PostgreSQL, all real. Wallets with balances; orders that cannot be paid fail and their units go
// back to the sale, bought by others; the books balance (reconcile), and a planted drift is found.

import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { connectDb } from '../../src/db/database.js'
import { UnitReturns } from '../../src/orders/unit-returns.js'
import { connectSaleRedis, whenReady } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { SaleStore } from '../../src/sale/sale-store.js'
import { countBy, runCheckouts } from '../support/checkouts.js'
import { eventually } from '../support/eventually.js'
import { adminSale, getWallet, moneyFacts, putWallet, runReconcile, sql } from '../support/money.js'
import { useStack } from '../support/stack-fixture.js'

const PRICE = 49.99

describe('wallets with balances on the lua strategy', () => {
  const fx = useStack(
    {
      strategy: 'lua',
      instances: 2,
      lockNodes: false,
      // The replica's acknowledgement may take longer than the default 50 ms while other tests
      // load the machine (a reservation is then answered 202, a sale's load 503): this file is
      // about money, not that bound, so it allows 1 s and its 200s stay exact.
      env: { CLAIM_IDLE_MS: '2000', WAIT_TIMEOUT_MS: '1000' },
    },
    { db: 'fs_money' },
  )

  it('wallet routes: the default balance, PUT by the admin only, amounts validated', async () => {
    expect(await getWallet(fx.stack, 'nobody-yet')).toEqual({
      user_id: 'nobody-yet',
      balance: 1000,
      charged: 0,
      charges: 0,
    })
    expect(await putWallet(fx.stack, 77, 150.5)).toEqual({
      user_id: '77',
      balance: 150.5,
      charged: 0,
      charges: 0,
    })
    expect(await getWallet(fx.stack, 77)).toMatchObject({ balance: 150.5 })
    const put = (body: unknown, token = fx.stack.adminToken, user = '77') =>
      fetch(`${fx.stack.url}/admin/wallets/${user}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as { error: Record<string, unknown> },
      }))
    for (const [body, field] of [
      [{ balance: 1.234 }, 'balance'],
      [{ balance: -1 }, 'balance'],
      [{ balance: '10' }, 'balance'],
      [{}, 'balance'],
    ] as const) {
      const r = await put(body)
      expect(r.status, JSON.stringify(body)).toBe(400)
      expect(r.body.error).toMatchObject({ code: 'INVALID_REQUEST', field })
    }
    expect((await put({ balance: 1 }, 'wrong')).status).toBe(401)
    const bad = await put({ balance: 1 }, fx.stack.adminToken, 'a%20b')
    expect(bad.status).toBe(400)
    expect(bad.body.error).toMatchObject({ code: 'INVALID_REQUEST', field: 'user_id' })
    expect((await fetch(`${fx.stack.url}/v1/wallets/a%20b`)).status).toBe(400)
  })

  it("the source articles' case: a balance that covers one unit, two sales bought at once from both instances → one paid order, balance 0, never negative", async () => {
    await fx.stack.putSale({ productId: '9931', stock: 100 })
    await fx.stack.putSale({ productId: '9932', stock: 100 })
    const users = Array.from({ length: 40 }, (_, i) => 5_000 + i)
    for (const u of users) await putWallet(fx.stack, u, PRICE)
    // Each user's two checkouts at the same moment, over many connections (both instances answer).
    const [a, b] = await Promise.all(
      ['9931', '9932'].map((p) =>
        runCheckouts({
          url: fx.stack.url,
          productId: p,
          calls: users.map((userId) => ({ userId })),
          concurrency: 40,
        }),
      ),
    )
    // Redis reserves a unit in each sale (it does not know the wallet): the worker charges.
    expect(countBy([...a!, ...b!], (o) => o.status)).toEqual({ 200: 80 })
    const ids = [...a!, ...b!].map((o) => o.body.order_id!)
    const settled = await eventually(
      () =>
        sql<{ status: string; user_id: string; failure_reason: string | null }>(
          fx.stack.databaseUrl,
          'SELECT status, user_id, failure_reason FROM orders WHERE order_id = ANY($1)',
          [ids],
        ),
      (rows) => rows.length === 80,
      { timeoutMs: 60_000, what: 'the 80 orders persisted' },
    )
    for (const u of users) {
      const mine = settled.filter((r) => r.user_id === String(u))
      expect(mine.map((r) => r.status).sort(), `user ${u}`).toEqual(['confirmed', 'failed'])
      expect(mine.find((r) => r.status === 'failed')?.failure_reason).toBe('INSUFFICIENT_FUNDS')
      expect(await getWallet(fx.stack, u)).toEqual({
        user_id: String(u),
        balance: 0,
        charged: PRICE,
        charges: 1,
      })
    }
    const facts = await moneyFacts(fx.stack.databaseUrl, users.map(String))
    expect(facts).toEqual({ payments: 40, charged_twice: 0, negative: 0, drifting: 0 })
    // The failed order says why, and its unit went back: the two sales together sold 40 of 200.
    const failed = await sql<{ order_id: string }>(
      fx.stack.databaseUrl,
      `SELECT order_id FROM orders WHERE order_id = ANY($1) AND status = 'failed' LIMIT 1`,
      [ids],
    )
    const order = await fetch(`${fx.stack.url}/v1/orders/${failed[0]!.order_id}`).then((r) => r.json())
    expect(order).toMatchObject({ status: 'failed', failure_reason: 'INSUFFICIENT_FUNDS' })
    const [sa, sb] = await Promise.all(
      ['9931', '9932'].map((p) =>
        eventually(
          () => adminSale(fx.stack, p),
          (c) => c.pending === 0 && c.returns_pending === 0,
          { timeoutMs: 30_000, what: `sale ${p} settled and returned` },
        ),
      ),
    )
    expect(sa!.persisted + sb!.persisted).toBe(40)
    expect(sa!.returned + sb!.returned).toBe(40)
    expect(sa!.remaining + sb!.remaining).toBe(160)
  })

  it('insufficient funds in a sale of 100: the unpaid units return and are bought by others; paid = 100, nobody charged twice, reconcile exits 0', {
    timeout: 120_000,
  }, async () => {
    await fx.stack.putSale({ productId: '9933', stock: 100 })
    const first = Array.from({ length: 100 }, (_, i) => 6_000 + i)
    const broke = first.filter((_, i) => i % 10 < 3) // 30 users who cannot pay
    for (const u of broke) await putWallet(fx.stack, u, 0)
    const one = await runCheckouts({
      url: fx.stack.url,
      productId: 9933,
      calls: first.map((userId) => ({ userId })),
      concurrency: 50,
    })
    expect(countBy(one, (o) => o.status)).toEqual({ 200: 100 })
    // The worker refuses the 30 it cannot charge; their units are back in Redis.
    const back = await eventually(
      () => adminSale(fx.stack, '9933'),
      (c) => c.persisted === 70 && c.remaining === 30 && c.returns_pending === 0,
      { timeoutMs: 60_000, what: 'the 30 unpaid units returned' },
    )
    expect(back).toMatchObject({ returned: 30, pending: 0 })
    // Others buy them: exactly 30 more sales, then sold out.
    const others = Array.from({ length: 120 }, (_, i) => 7_000 + i)
    const two = await runCheckouts({
      url: fx.stack.url,
      productId: 9933,
      calls: others.map((userId) => ({ userId })),
      concurrency: 50,
    })
    expect(countBy(two, (o) => o.status)).toEqual({ 200: 30, 409: 90 })
    for (const o of two.filter((x) => x.status === 409)) expect(o.body.error?.code).toBe('SOLD_OUT')
    const end = await eventually(
      () => adminSale(fx.stack, '9933'),
      (c) => c.persisted === 100 && c.pending === 0,
      { timeoutMs: 60_000, what: '100 paid' },
    )
    expect(end).toMatchObject({ stock_total: 100, remaining: 0, returned: 30, returns_pending: 0 })
    const paid = await sql<{ n: number }>(
      fx.stack.databaseUrl,
      `SELECT count(*)::int AS n FROM orders o JOIN payments p USING (order_id) WHERE o.product_id = '9933' AND o.status = 'confirmed'`,
    )
    expect(paid[0]!.n).toBe(100)
    const facts = await moneyFacts(fx.stack.databaseUrl, [...first, ...others].map(String))
    expect(facts).toEqual({ payments: 100, charged_twice: 0, negative: 0, drifting: 0 })
    for (const u of broke.slice(0, 5)) {
      expect(await getWallet(fx.stack, u)).toEqual({ user_id: String(u), balance: 0, charged: 0, charges: 0 })
    }
    const books = await runReconcile(fx.stack)
    expect(books.code, books.out + books.err).toBe(0)
    expect(books.report.find((s) => s.product_id === '9933')).toMatchObject({
      returned: 30,
      returns_pending: 0,
      problems: [],
    })
  })

  it('refunds of confirmed orders, 10 at once each over both instances: one refund each, the units sold again; reconcile exits 0', {
    timeout: 120_000,
  }, async () => {
    await fx.stack.putSale({ productId: '9937', stock: 20 })
    const buyers = Array.from({ length: 20 }, (_, i) => 8_500 + i)
    const bought = await runCheckouts({
      url: fx.stack.url,
      productId: 9937,
      calls: buyers.map((userId) => ({ userId })),
      concurrency: 20,
    })
    expect(countBy(bought, (o) => o.status)).toEqual({ 200: 20 })
    await eventually(
      () => adminSale(fx.stack, '9937'),
      (c) => c.persisted === 20 && c.pending === 0,
      { timeoutMs: 60_000, what: '20 orders confirmed' },
    )
    const refund = (orderId: string) =>
      fetch(`${fx.stack.url}/admin/orders/${orderId}/refund`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fx.stack.adminToken}` },
      }).then(async (r) => ({ status: r.status, body: await r.text() }))
    const refunded = bought.slice(0, 5)
    for (const o of refunded) {
      const answers = await Promise.all(Array.from({ length: 10 }, () => refund(o.body.order_id!)))
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200))
      expect(new Set(answers.map((a) => a.body)).size).toBe(1)
      expect(JSON.parse(answers[0]!.body)).toMatchObject({ status: 'refunded', amount: PRICE })
      expect(await getWallet(fx.stack, o.userId)).toEqual({
        user_id: String(o.userId),
        balance: 1000,
        charged: PRICE,
        charges: 1,
      })
    }
    const back = await adminSale(fx.stack, '9937')
    expect(back).toMatchObject({ persisted: 15, remaining: 5, returned: 5, returns_pending: 0 })
    // The five units are sold again, and no more.
    const again = await runCheckouts({
      url: fx.stack.url,
      productId: 9937,
      calls: Array.from({ length: 12 }, (_, i) => ({ userId: 8_600 + i })),
      concurrency: 12,
    })
    expect(countBy(again, (o) => o.status)).toEqual({ 200: 5, 409: 7 })
    await eventually(
      () => adminSale(fx.stack, '9937'),
      (c) => c.persisted === 20 && c.pending === 0 && c.remaining === 0,
      { timeoutMs: 60_000, what: '20 confirmed again' },
    )
    const rows = await sql<{ refunds: number; refunded: number }>(
      fx.stack.databaseUrl,
      `SELECT (SELECT count(*)::int FROM refunds rf JOIN orders o USING (order_id) WHERE o.product_id = '9937') AS refunds,
              (SELECT count(*)::int FROM orders WHERE product_id = '9937' AND status = 'refunded') AS refunded`,
    )
    expect(rows).toEqual([{ refunds: 5, refunded: 5 }])
    const books = await runReconcile(fx.stack)
    expect(books.code, books.out + books.err).toBe(0)
    expect(books.report.find((r) => r.product_id === '9937')).toMatchObject({ returned: 5, problems: [] })
  })

  it('a unit given back twice (a redelivered event, a retried return) comes back once; a return a crash left pending is finished once', async () => {
    const config = loadConfig(fx.stack.env)
    const redis = connectSaleRedis(config, 'money-test')
    const db = connectDb(fx.stack.databaseUrl, 2)
    try {
      await whenReady(redis)
      const store = new SaleStore(redis)
      const returns = new UnitReturns({ db, store })
      const failed = await sql<{ order_id: string; user_id: string; round: number }>(
        fx.stack.databaseUrl,
        `SELECT order_id, user_id, round FROM orders WHERE product_id = '9933' AND status = 'failed' ORDER BY order_id LIMIT 3`,
      )
      const before = await adminSale(fx.stack, '9933')
      const again = failed.map((o) => ({
        orderId: o.order_id,
        userId: o.user_id,
        round: o.round,
        reason: 'INSUFFICIENT_FUNDS' as const,
      }))
      expect(await returns.give('9933', again)).toBe(0)
      expect(await returns.give('9933', again)).toBe(0)
      // A worker that died after Redis took the unit back and before SQL marked it done.
      await sql(
        fx.stack.databaseUrl,
        `WITH o AS (UPDATE orders SET unit_return = 'pending' WHERE order_id = $1 RETURNING 1)
         UPDATE sales SET returned = returned - 1 WHERE product_id = '9933'`,
        [failed[0]!.order_id],
      )
      expect(await returns.resumePending('9933')).toBe(0)
      const after = await adminSale(fx.stack, '9933')
      expect(after).toEqual(before)
      expect(await redis.hlen(saleKeys('9933').returned)).toBe(after.returned)
    } finally {
      redis.disconnect()
      await db.end()
    }
  })

  it('a hold sale (sales.payment = hold): the worker persists reserved with pay_by, takes sold, charges nothing; GET /v1/orders shows it', async () => {
    await fx.stack.putSale({ productId: '9936', stock: 5 })
    // PUT /admin/sales's `payment` field is the pay/cancel work's; the worker reads SQL's row.
    await sql(
      fx.stack.databaseUrl,
      `UPDATE sales SET payment = 'hold', hold_seconds = 300 WHERE product_id = '9936'`,
    )
    const users = [8_001, 8_002, 8_003]
    const outcomes = await runCheckouts({
      url: fx.stack.url,
      productId: 9936,
      calls: users.map((userId) => ({ userId })),
    })
    expect(outcomes.map((o) => o.status)).toEqual([200, 200, 200])
    const ids = outcomes.map((o) => o.body.order_id!)
    const rows = await eventually(
      () =>
        sql<{ order_id: string; status: string; reserved_at: Date; pay_by: Date | null }>(
          fx.stack.databaseUrl,
          'SELECT order_id, status, reserved_at, pay_by FROM orders WHERE order_id = ANY($1)',
          [ids],
        ),
      (r) => r.length === 3,
      { timeoutMs: 30_000, what: 'the 3 held orders persisted' },
    )
    for (const r of rows) {
      expect(r.status).toBe('reserved')
      expect(r.pay_by!.getTime() - r.reserved_at.getTime()).toBe(300_000)
      const view = await fetch(`${fx.stack.url}/v1/orders/${r.order_id}`).then((res) => res.json())
      expect(view).toMatchObject({ status: 'reserved', pay_by: r.pay_by!.toISOString() })
    }
    expect(await moneyFacts(fx.stack.databaseUrl, users.map(String))).toMatchObject({ payments: 0 })
    for (const u of users) expect(await getWallet(fx.stack, u)).toMatchObject({ balance: 1000, charges: 0 })
    expect(await adminSale(fx.stack, '9936')).toMatchObject({ persisted: 3, remaining: 2, pending: 0 })
  })

  it('reconcile exits 1 after a planted drift: a balance changed behind its back, a refund of an order that was not refunded, a unit added in Redis', async () => {
    const clean = await runReconcile(fx.stack)
    expect(clean.code, clean.out + clean.err).toBe(0)
    await sql(
      fx.stack.databaseUrl,
      `UPDATE wallets SET balance_cents = balance_cents + 1 WHERE user_id = '7000'`,
    )
    const wallet = await runReconcile(fx.stack)
    await sql(
      fx.stack.databaseUrl,
      `UPDATE wallets SET balance_cents = balance_cents - 1 WHERE user_id = '7000'`,
    )
    expect(wallet.code).toBe(1)
    expect(
      wallet.report.some((s) =>
        s.problems.some((p) => p.includes('balance ≠ funded − charged + refunded') && p.includes('7000')),
      ),
    ).toBe(true)
    // A refund written for an order that was not refunded (its money left twice, its unit kept).
    await sql(
      fx.stack.databaseUrl,
      `INSERT INTO refunds (order_id, user_id, amount_cents)
       SELECT p.order_id, p.user_id, p.amount_cents FROM payments p JOIN orders o USING (order_id)
       WHERE o.product_id = '9933' AND o.status = 'confirmed' ORDER BY p.order_id LIMIT 1`,
    )
    const refund = await runReconcile(fx.stack)
    await sql(
      fx.stack.databaseUrl,
      `DELETE FROM refunds WHERE order_id IN (SELECT order_id FROM orders WHERE product_id = '9933')`,
    )
    expect(refund.code).toBe(1)
    const refundProblems = refund.report.find((s) => s.product_id === '9933')?.problems ?? []
    expect(refundProblems).toContain('1 refund(s) of orders that are not refunded, or not of what was paid')
    expect(refundProblems).toContain("the wallets' refunded totals differ from the sum of refunds")
    const redis = connectSaleRedis(loadConfig(fx.stack.env), 'money-test')
    try {
      await whenReady(redis)
      await redis.incr(saleKeys('9933').stock)
      const stock = await runReconcile(fx.stack)
      await redis.decr(saleKeys('9933').stock)
      expect(stock.code).toBe(1)
      const problems = stock.report.find((s) => s.product_id === '9933')?.problems ?? []
      expect(problems.some((p) => p.startsWith('drift: stock 100 ≠ sold 100 + remaining in Redis 1'))).toBe(
        true,
      )
    } finally {
      redis.disconnect()
    }
    expect((await runReconcile(fx.stack)).code).toBe(0)
  })
})
