// Hold sales (issue 16 item 3) through app.inject() on real Redis (one node, durability none) and
// real PostgreSQL: the admin's payment/hold_seconds, the reserved answer with pay_by, pay and cancel
// (one charge, identical repeats, 402 leaves the order reserved), expiry by the sweeper and by a
// late pay, and the sweeper's fence refusing an older token. Held orders are recorded in SQL here
// as the worker records them (status reserved, pay_by, sold + 1), so each step is checked alone;
// hold-sweeper-stack.test.ts runs the whole path with real workers and faults.
import { type NodeSet, startNodes } from '@kunci/topology'
import { RedisLock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { expireDue, HoldSweeper } from '../../src/orders/hold-sweeper.js'
import { UnitReturns } from '../../src/orders/unit-returns.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { setBalance } from '../../src/sql/wallets.js'
import { eventually } from '../support/eventually.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'
const PRICE = 20 // currency units; the default wallet (100.00) pays 5

describe('hold sales: admin, reserved answers, pay, cancel, expiry', () => {
  let fx: InProcessApp
  let runtime: Runtime
  let app: App

  beforeAll(async () => {
    fx = await startInProcessApp('fs_holds', {
      ADMIN_TOKEN: TOKEN,
      DURABILITY: 'none',
      DEFAULT_WALLET_BALANCE: '100.00',
    })
    runtime = fx.runtime
    app = fx.app
  }, 60_000)

  afterAll(async () => {
    await fx?.close()
  })

  const put = (id: string, body: object) =>
    app.inject({
      method: 'PUT',
      url: `/admin/sales/${id}`,
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: body,
    })
  const checkout = (productId: string, userId: string, key?: string) =>
    app.inject({
      method: 'POST',
      url: '/v1/checkout',
      headers: key ? { 'idempotency-key': key } : {},
      payload: { product_id: productId, user_id: userId },
    })
  const act = (orderId: string, action: 'pay' | 'cancel', userId: string) =>
    app.inject({ method: 'POST', url: `/v1/orders/${orderId}/${action}`, payload: { user_id: userId } })
  const getOrder = async (orderId: string) =>
    (await app.inject({ method: 'GET', url: `/v1/orders/${orderId}` })).json()
  const stock = async (productId: string) => Number(await runtime.redis.get(saleKeys(productId).stock))
  const sql = <T extends Record<string, unknown>>(text: string, values: unknown[] = []) =>
    runtime.db.query<T>(text, values).then((r) => r.rows)

  /** What the worker writes for a new order of a hold sale (status reserved, pay_by, sold + 1). */
  async function recordHeld(orderId: string, productId: string, userId: string, payBy: Date): Promise<void> {
    const [sale] = await sql<{ round: number }>('SELECT round FROM sales WHERE product_id = $1', [productId])
    await runtime.db.query(
      `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, reserved_at, pay_by)
       VALUES ($1, $2, $3, $4, 1, $5, 'reserved', 'lua', now(), $6)`,
      [orderId, productId, sale!.round, userId, PRICE * 100, payBy],
    )
    await runtime.db.query('UPDATE sales SET sold = sold + 1 WHERE product_id = $1', [productId])
  }

  /** A checkout of a hold sale, recorded in SQL (pay_by as answered, or `payBy` to make it due). */
  async function held(productId: string, userId: string, payBy?: Date): Promise<string> {
    const res = await checkout(productId, userId)
    expect(res.statusCode, res.body).toBe(200)
    const body = res.json()
    await recordHeld(body.order_id, productId, userId, payBy ?? new Date(body.pay_by))
    return body.order_id
  }

  it('validates payment and hold_seconds, naming the field', async () => {
    const cases: [object, string][] = [
      [{ stock: 5, price: 1, payment: 'hold' }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'instant', hold_seconds: 60 }, 'hold_seconds'],
      [{ stock: 5, price: 1, hold_seconds: 60 }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'hold', hold_seconds: 0 }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'hold', hold_seconds: 86_401 }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'hold', hold_seconds: 1.5 }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'hold', hold_seconds: '60' }, 'hold_seconds'],
      [{ stock: 5, price: 1, payment: 'later', hold_seconds: 60 }, 'payment'],
    ]
    for (const [body, field] of cases) {
      const res = await put('bad', body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      expect(res.json().error).toMatchObject({ code: 'INVALID_REQUEST', field })
    }
    const ok = await put('h1', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    expect(ok.statusCode).toBe(200)
    expect(ok.json()).toMatchObject({ payment: 'hold', hold_seconds: 600 })
    const instant = await put('i1', { stock: 10, price: PRICE })
    expect(instant.json()).toMatchObject({ payment: 'instant', hold_seconds: null })
    expect(await sql('SELECT payment, hold_seconds FROM sales WHERE product_id = $1', ['h1'])).toEqual([
      { payment: 'hold', hold_seconds: 600 },
    ])
  })

  it('validates the pay and cancel bodies, naming the field', async () => {
    for (const action of ['pay', 'cancel'] as const) {
      const cases: [unknown, string][] = [
        [{}, 'user_id'],
        [{ user_id: '' }, 'user_id'],
        [{ user_id: 'a b' }, 'user_id'],
        [{ user_id: 0 }, 'user_id'],
        [{ user_id: true }, 'user_id'],
      ]
      for (const [payload, field] of cases) {
        const res = await app.inject({
          method: 'POST',
          url: `/v1/orders/h1.x/${action}`,
          payload: payload as object,
        })
        expect(res.statusCode, `${action} ${JSON.stringify(payload)}`).toBe(400)
        expect(res.json().error).toMatchObject({ code: 'INVALID_REQUEST', field })
      }
      const unknown = await app.inject({
        method: 'POST',
        url: `/v1/orders/nodot/${action}`,
        payload: { user_id: 'u' },
      })
      expect(unknown.statusCode).toBe(404)
      expect(unknown.json().error.code).toBe('UNKNOWN_ORDER')
    }
  })

  it('answers a hold sale reserved with pay_by (Redis time + hold_seconds); a replay answers the same', async () => {
    await put('h2', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const before = Date.now()
    const first = await checkout('h2', 'u1', 'k-1')
    expect(first.statusCode, first.body).toBe(200)
    const body = first.json()
    expect(body.status).toBe('reserved')
    const payBy = Date.parse(body.pay_by)
    // The Redis server's clock is this machine's: within a second of ours.
    expect(payBy).toBeGreaterThan(before + 600_000 - 1_000)
    expect(payBy).toBeLessThan(Date.now() + 600_000 + 1_000)
    const replay = await checkout('h2', 'u1', 'k-1')
    expect(replay.json()).toMatchObject({ order_id: body.order_id, status: 'reserved', pay_by: body.pay_by })
    // The event carries the same reservation time the worker turns into pay_by.
    const entries = (await runtime.redis.xrange(saleKeys('h2').orders, '-', '+')) as [string, string[]][]
    const fields = entries[0]![1]
    const at = Number(fields[fields.indexOf('reserved_at') + 1])
    expect(at + 600_000).toBe(payBy)
    // Redis knows it, SQL not yet: GET shows it reserved with its pay_by, pay says "retry".
    expect(await getOrder(body.order_id)).toMatchObject({ status: 'reserved', pay_by: body.pay_by })
    expect((await act(body.order_id, 'pay', 'u2')).json().error.code).toBe('NOT_YOUR_ORDER')
    const pending = await act(body.order_id, 'pay', 'u1')
    expect(pending.statusCode).toBe(409)
    expect(pending.json().error.code).toBe('ORDER_PENDING')
    expect(pending.headers['retry-after']).toBe('1')
    // An instant sale answers as before: no pay_by.
    await put('i2', { stock: 10, price: PRICE })
    const instant = (await checkout('i2', 'u1')).json()
    expect(instant.status).toBe('reserved')
    expect(instant.pay_by).toBeUndefined()
  })

  it('pays once: 402 keeps the order reserved, then one charge and identical answers, also 20 at once', async () => {
    await put('h3', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const orderId = await held('h3', 'payer')
    expect((await act(orderId, 'pay', 'someone-else')).json().error.code).toBe('NOT_YOUR_ORDER')
    expect((await act(orderId, 'pay', 'someone-else')).statusCode).toBe(403)
    expect((await act('h3.nosuchorder', 'pay', 'payer')).statusCode).toBe(404)

    await setBalance(runtime.db, 'payer', 5_00, 100_00)
    const poor = await act(orderId, 'pay', 'payer')
    expect(poor.statusCode).toBe(402)
    expect(poor.json().error.code).toBe('INSUFFICIENT_FUNDS')
    expect(await getOrder(orderId)).toMatchObject({ status: 'reserved' })
    expect(await sql('SELECT count(*)::int AS n FROM payments WHERE order_id = $1', [orderId])).toEqual([
      { n: 0 },
    ])

    await setBalance(runtime.db, 'payer', 50_00, 100_00)
    const answers = await Promise.all(Array.from({ length: 20 }, () => act(orderId, 'pay', 'payer')))
    expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200))
    const bodies = new Set(answers.map((a) => a.body))
    expect(bodies.size).toBe(1)
    const paid = answers[0]!.json()
    expect(paid).toMatchObject({
      order_id: orderId,
      status: 'paid',
      user_id: 'payer',
      product_id: 'h3',
      amount: PRICE,
    })
    expect(Date.parse(paid.paid_at)).not.toBeNaN()
    expect((await act(orderId, 'pay', 'payer')).body).toBe(answers[0]!.body)
    expect(await sql('SELECT count(*)::int AS n FROM payments WHERE order_id = $1', [orderId])).toEqual([
      { n: 1 },
    ])
    expect(await sql(`SELECT balance_cents, charges FROM wallets WHERE user_id = 'payer'`)).toEqual([
      { balance_cents: String(50_00 - PRICE * 100), charges: 1 },
    ])
    expect(await getOrder(orderId)).toMatchObject({ status: 'paid' })
    // A paid order cannot be cancelled.
    const cancel = await act(orderId, 'cancel', 'payer')
    expect(cancel.statusCode).toBe(409)
    expect(cancel.json().error).toMatchObject({ code: 'ORDER_NOT_PAYABLE', status: 'paid' })
  })

  it('cancels once, gives the unit back, and a cancelled order cannot be paid', async () => {
    await put('h4', { stock: 3, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const orderId = await held('h4', 'canceller')
    expect(await stock('h4')).toBe(2)
    const first = await act(orderId, 'cancel', 'canceller')
    expect(first.statusCode, first.body).toBe(200)
    expect(first.json()).toMatchObject({ order_id: orderId, status: 'cancelled', user_id: 'canceller' })
    expect((await act(orderId, 'cancel', 'canceller')).body).toBe(first.body)
    expect(await stock('h4')).toBe(3)
    expect(await sql('SELECT sold, returned FROM sales WHERE product_id = $1', ['h4'])).toEqual([
      { sold: 0, returned: 1 },
    ])
    expect(await sql('SELECT unit_return FROM orders WHERE order_id = $1', [orderId])).toEqual([
      { unit_return: 'done' },
    ])
    const pay = await act(orderId, 'pay', 'canceller')
    expect(pay.statusCode).toBe(409)
    expect(pay.json().error).toMatchObject({ code: 'ORDER_NOT_PAYABLE', status: 'cancelled' })
    expect(await getOrder(orderId)).toMatchObject({ status: 'cancelled' })
    // The user may buy again: the buyer record dropped the unit.
    expect((await checkout('h4', 'canceller')).statusCode).toBe(200)
  })

  it('refunds a paid order once, also 20 at once: the charge back to the wallet, the unit back to the sale', async () => {
    await put('h8', { stock: 2, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const refund = (orderId: string, token = TOKEN) =>
      app.inject({
        method: 'POST',
        url: `/admin/orders/${orderId}/refund`,
        headers: { authorization: `Bearer ${token}` },
      })
    const orderId = await held('h8', 'refundee')
    // Not paid yet: a held order is cancelled, not refunded.
    const early = await refund(orderId)
    expect(early.statusCode).toBe(409)
    expect(early.json().error).toMatchObject({ code: 'ORDER_NOT_REFUNDABLE', status: 'reserved' })
    expect(early.json().error.message).toMatch(/cancel/)
    expect((await refund(orderId, 'wrong-token')).statusCode).toBe(401)
    expect((await refund('h8.nosuchorder')).json().error.code).toBe('UNKNOWN_ORDER')

    await setBalance(runtime.db, 'refundee', 50_00, 100_00)
    expect((await act(orderId, 'pay', 'refundee')).statusCode).toBe(200)
    expect(await stock('h8')).toBe(1)
    const answers = await Promise.all(Array.from({ length: 20 }, () => refund(orderId)))
    expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200))
    expect([...new Set(answers.map((a) => a.body))]).toEqual([answers[0]!.body])
    const body = answers[0]!.json()
    expect(body).toMatchObject({ order_id: orderId, status: 'refunded', user_id: 'refundee', amount: PRICE })
    expect(Date.parse(body.refunded_at)).toBeGreaterThanOrEqual(Date.parse(body.paid_at))
    expect((await refund(orderId)).body).toBe(answers[0]!.body)
    // One refund; the wallet whole again, its books intact.
    expect(await sql('SELECT amount_cents FROM refunds WHERE order_id = $1', [orderId])).toEqual([
      { amount_cents: String(PRICE * 100) },
    ])
    expect(
      await sql(
        `SELECT balance_cents, charged_cents, refunded_cents,
           balance_cents = funded_cents - charged_cents + refunded_cents AS books
         FROM wallets WHERE user_id = 'refundee'`,
      ),
    ).toEqual([
      {
        balance_cents: '5000',
        charged_cents: String(PRICE * 100),
        refunded_cents: String(PRICE * 100),
        books: true,
      },
    ])
    // The unit is back on sale, once, and counted as returned.
    expect(await stock('h8')).toBe(2)
    expect(await sql('SELECT sold, returned FROM sales WHERE product_id = $1', ['h8'])).toEqual([
      { sold: 0, returned: 1 },
    ])
    expect(await runtime.redis.hget(saleKeys('h8').returned, orderId)).toBe('refunded')
    expect(await getOrder(orderId)).toMatchObject({ status: 'refunded' })
    // A refunded order is not paid or cancelled again; the buyer may buy again.
    expect((await act(orderId, 'pay', 'refundee')).json().error).toMatchObject({
      code: 'ORDER_NOT_PAYABLE',
      status: 'refunded',
    })
    expect((await act(orderId, 'cancel', 'refundee')).json().error).toMatchObject({
      code: 'ORDER_NOT_PAYABLE',
      status: 'refunded',
    })
    expect((await checkout('h8', 'refundee')).statusCode).toBe(200)
  })

  it("a refund whose Redis step fails (the sale's node paused) is answered, left pending, and finished once", async () => {
    await put('h9', { stock: 2, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const orderId = await held('h9', 'paused-refund')
    expect((await act(orderId, 'pay', 'paused-refund')).statusCode).toBe(200)
    expect(await stock('h9')).toBe(1)
    const refund = () =>
      app.inject({
        method: 'POST',
        url: `/admin/orders/${orderId}/refund`,
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    fx.node.pause()
    let first: Awaited<ReturnType<typeof refund>>
    try {
      // The money moves in SQL; the unit's return waits for Redis (its call gives up after 2 s).
      first = await refund()
    } finally {
      fx.node.resume()
    }
    expect(first.statusCode, first.body).toBe(200)
    expect(first.json()).toMatchObject({ status: 'refunded' })
    expect(await sql('SELECT unit_return FROM orders WHERE order_id = $1', [orderId])).toEqual([
      { unit_return: 'pending' },
    ])
    // The paused node ran the return it had been sent once it was resumed, or not: either way
    // the worker's resume loop (here called by hand, twice) finishes it once.
    const returns = new UnitReturns({ db: runtime.db, store: runtime.deps.store })
    await returns.resumePending('h9')
    await returns.resumePending('h9')
    expect(await sql('SELECT unit_return FROM orders WHERE order_id = $1', [orderId])).toEqual([
      { unit_return: 'done' },
    ])
    expect(await sql('SELECT sold, returned FROM sales WHERE product_id = $1', ['h9'])).toEqual([
      { sold: 0, returned: 1 },
    ])
    expect(await stock('h9')).toBe(2)
    expect(await sql('SELECT count(*)::int AS n FROM refunds WHERE order_id = $1', [orderId])).toEqual([
      { n: 1 },
    ])
    expect((await refund()).body).toBe(first.body)
  })

  it('expires: a pay after pay_by answers expired and returns the unit; the sweeper expires the rest once', async () => {
    await put('h5', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const past = new Date(Date.now() - 1_000)
    const late = await held('h5', 'late', past)
    const never = await Promise.all(['n1', 'n2', 'n3'].map((u) => held('h5', u, past)))
    const fresh = await held('h5', 'fresh')
    expect(await stock('h5')).toBe(5)

    const pay = await act(late, 'pay', 'late')
    expect(pay.statusCode).toBe(409)
    expect(pay.json().error).toMatchObject({ code: 'ORDER_NOT_PAYABLE', status: 'expired' })
    expect(await stock('h5')).toBe(6)

    const locks = new RedisLock({ client: runtime.redis, ttlMs: 2_000, maxTtlMs: 2_000 })
    const outcomes: string[] = []
    const sweeper = new HoldSweeper({
      db: runtime.db,
      locks,
      returns: new UnitReturns({ db: runtime.db, store: runtime.deps.store }),
      intervalMs: 100,
      lockTtlMs: 2_000,
      batchSize: 2,
      onSwept: (o) => outcomes.push(o),
      log: (l) => outcomes.push(l),
    })
    try {
      sweeper.start()
      await eventually(
        () =>
          sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM orders WHERE product_id = 'h5' AND status = 'expired'`,
          ),
        (r) => r[0]!.n === 4,
        { what: 'the due orders expired' },
      )
      await eventually(
        () => stock('h5'),
        (s) => s === 9,
        { what: 'their units back in Redis' },
      )
    } catch (err) {
      throw new Error(`${(err as Error).message}; sweeps: ${outcomes.slice(-5).join(', ')}`)
    } finally {
      await sweeper.stop()
      await locks.close()
    }
    expect(outcomes).toContain('swept')
    for (const id of never) expect(await getOrder(id)).toMatchObject({ status: 'expired' })
    expect(await getOrder(fresh)).toMatchObject({ status: 'reserved' })
    expect(await sql('SELECT sold, returned FROM sales WHERE product_id = $1', ['h5'])).toEqual([
      { sold: 1, returned: 4 },
    ])
    expect(await runtime.redis.hlen(saleKeys('h5').returned)).toBe(4)
    expect(
      await sql(`SELECT count(*)::int AS n FROM orders WHERE product_id = 'h5' AND unit_return <> 'done'`),
    ).toEqual([{ n: 0 }])
  })

  it('a reset ends the held orders of the old round: they expire, without touching the new round', async () => {
    await put('h7', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const old1 = await held('h7', 'r1')
    const old2 = await held('h7', 'r2')
    // Reset to an instant sale: the sweeper still looks at it while it has held orders.
    await put('h7', { stock: 10, price: PRICE })
    const pay = await act(old1, 'pay', 'r1')
    expect(pay.json().error).toMatchObject({ code: 'ORDER_NOT_PAYABLE', status: 'expired' })
    const ended = await expireDue(runtime.db, { productId: 'h7', fence: 5_000, batchSize: 10 })
    expect((ended as { orderId: string }[]).map((o) => o.orderId)).toEqual([old2])
    expect(await sql('SELECT round, sold, returned FROM sales WHERE product_id = $1', ['h7'])).toEqual([
      { round: 2, sold: 0, returned: 0 },
    ])
    expect(await stock('h7')).toBe(10)
  })

  it('refuses an older fence: nothing expires, nothing moves', async () => {
    await put('h6', { stock: 10, price: PRICE, payment: 'hold', hold_seconds: 600 })
    const past = new Date(Date.now() - 1_000)
    await held('h6', 'a', past)
    await held('h6', 'b', past)
    const newer = await expireDue(runtime.db, { productId: 'h6', fence: 2_000, batchSize: 1 })
    expect(newer).not.toBe('fenced_out')
    expect((newer as unknown[]).length).toBe(1)
    // The same holder's next batch passes (<=); an older holder's is refused.
    const older = await expireDue(runtime.db, { productId: 'h6', fence: 1_999, batchSize: 10 })
    expect(older).toBe('fenced_out')
    expect(
      await sql(
        `SELECT status, count(*)::int AS n FROM orders WHERE product_id = 'h6' GROUP BY status ORDER BY status`,
      ),
    ).toEqual([
      { status: 'expired', n: 1 },
      { status: 'reserved', n: 1 },
    ])
    expect(await sql('SELECT sold, sweep_fence FROM sales WHERE product_id = $1', ['h6'])).toEqual([
      { sold: 1, sweep_fence: '2000' },
    ])
    const again = await expireDue(runtime.db, { productId: 'h6', fence: 2_000, batchSize: 10 })
    expect((again as unknown[]).length).toBe(1)
  })
})

// The redlock strategy sells from SQL: a hold sale's order is written reserved in its checkout
// transaction, with pay_by = PostgreSQL's now() + hold_seconds, and paid by the same route.
describe('hold sales with the redlock strategy', () => {
  let fx: InProcessApp
  let lockNodes: NodeSet
  let runtime: Runtime
  let app: App

  beforeAll(async () => {
    lockNodes = await startNodes({ count: 3, proxy: false })
    fx = await startInProcessApp('fs_holds_rl', {
      STRATEGY: 'redlock',
      // The lock nodes sit out their restart quarantine first: the checkout is retried past it.
      REDLOCK_NODES: lockNodes.nodes.map((n) => `${n.host}:${n.port}`).join(','),
      ADMIN_TOKEN: TOKEN,
      DURABILITY: 'none',
      DEFAULT_WALLET_BALANCE: '100.00',
    })
    runtime = fx.runtime
    app = fx.app
  }, 60_000)

  afterAll(async () => {
    await fx?.close()
    await lockNodes?.stop()
  })

  async function putHoldSale(productId: string): Promise<void> {
    const put = await app.inject({
      method: 'PUT',
      url: `/admin/sales/${productId}`,
      headers: { authorization: `Bearer ${TOKEN}` },
      payload: { stock: 5, price: PRICE, payment: 'hold', hold_seconds: 600 },
    })
    expect(put.statusCode, put.body).toBe(200)
  }

  it('reserves with pay_by, pays once, counts the held unit against the per-user limit', async () => {
    await putHoldSale('r1')
    const before = Date.now()
    const res = await eventually(
      () => app.inject({ method: 'POST', url: '/v1/checkout', payload: { product_id: 'r1', user_id: 'u1' } }),
      (r) => r.statusCode !== 503 && r.statusCode !== 429,
      { what: 'a checkout past the lock node quarantine' },
    )
    expect(res.statusCode, res.body).toBe(200)
    const body = res.json()
    expect(body.status).toBe('reserved')
    expect(Date.parse(body.pay_by)).toBeGreaterThan(before + 600_000 - 2_000)
    const again = await app.inject({
      method: 'POST',
      url: '/v1/checkout',
      payload: { product_id: 'r1', user_id: 'u1' },
    })
    expect(again.json().error?.code).toBe('ALREADY_PURCHASED')
    const rows = await runtime.db.query(`SELECT status, pay_by FROM orders WHERE order_id = $1`, [
      body.order_id,
    ])
    expect(rows.rows[0]).toMatchObject({ status: 'reserved' })
    expect((rows.rows[0]!.pay_by as Date).toISOString()).toBe(body.pay_by)
    expect((await runtime.db.query('SELECT count(*)::int AS n FROM payments')).rows).toEqual([{ n: 0 }])
    const paid = await app.inject({
      method: 'POST',
      url: `/v1/orders/${body.order_id}/pay`,
      payload: { user_id: 'u1' },
    })
    expect(paid.statusCode, paid.body).toBe(200)
    expect(paid.json()).toMatchObject({ status: 'paid', amount: PRICE })
    expect((await runtime.db.query('SELECT count(*)::int AS n FROM payments')).rows).toEqual([{ n: 1 }])
  })

  it('a repeat with the same Idempotency-Key answers the same: reserved, with the same pay_by', async () => {
    await putHoldSale('r2')
    const keyed = () =>
      app.inject({
        method: 'POST',
        url: '/v1/checkout',
        headers: { 'idempotency-key': 'rl-hold-1' },
        payload: { product_id: 'r2', user_id: 'u2' },
      })
    const first = await eventually(keyed, (r) => r.statusCode !== 503 && r.statusCode !== 429, {
      what: 'a checkout past the lock node quarantine',
    })
    expect(first.statusCode, first.body).toBe(200)
    const body = first.json()
    expect(body).toMatchObject({ status: 'reserved', pay_by: expect.any(String) })
    for (const replay of await Promise.all([keyed(), keyed()])) {
      expect(replay.statusCode, replay.body).toBe(200)
      expect(replay.json()).toEqual(body)
    }
  })
})
