import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { type FaultProxy, startProxy } from '@kunci/topology'
import pg from 'pg'
import { Connection } from 'rabbitmq-client'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
import { adminSale, moneyFacts, runReconcile } from '../support/money.js'
import { type LocalStack, startStack } from '../support/stack-fixture.js'

// QUEUE_URL=amqp://…: stream (outbox) → relay (publisher confirms) → durable quorum queue →
// consumer (manual ack) → PostgreSQL. Everything real: a 3+3 Redis Cluster, the machine's
// RabbitMQ (through a fault proxy, so a test can cut the broker off) and PostgreSQL, the service
// and worker processes of the built CLI.
const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672'
const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const RUN = randomBytes(5).toString('hex')
/** Unique per run: parallel runs never share a queue. */
const QUEUE = `fs-test-${RUN}.orders`
const DEAD_QUEUE = `${QUEUE}.dead`
const MAX_DELIVERIES = 3

interface Outcome {
  userId: number
  status: number
  body: { order_id?: string; error?: { code: string } }
}

/** `calls` checkouts for the given users, at most `concurrency` in flight; 429/503 are retried. */
async function checkouts(url: string, productId: string, users: number[], concurrency: number) {
  const out: Outcome[] = []
  let next = 0
  const deadline = Date.now() + 120_000
  const one = async (userId: number): Promise<Outcome> => {
    for (;;) {
      const res = await fetch(`${url}/v1/checkout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ product_id: Number(productId), user_id: userId }),
      }).catch(() => undefined)
      const status = res?.status ?? 0
      const body = res ? ((await res.json().catch(() => ({}))) as Outcome['body']) : {}
      if (![0, 429, 503].includes(status) || Date.now() > deadline) return { userId, status, body }
      await sleep(20 + Math.random() * 50)
    }
  }
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < users.length) {
        const userId = users[next++]!
        out.push(await one(userId))
      }
    }),
  )
  return out
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i)

/**
 * The answers that reserved a unit: 200, or 202 when no replica acknowledged it within
 * WAIT_TIMEOUT_MS (a loaded machine): a correct answer, whose order is followed to its end in SQL.
 */
const reserved = (outcomes: Outcome[]) => outcomes.filter((o) => o.status === 200 || o.status === 202)

interface Facts {
  confirmed: Map<string, string>
  failed: number
  payments: number
  distinctPayments: number
  usersTwice: number
}

async function facts(db: pg.Client, productId: string): Promise<Facts> {
  const orders = await db.query<{ order_id: string; user_id: string; status: string }>(
    'SELECT order_id, user_id, status FROM orders WHERE product_id = $1',
    [productId],
  )
  const pay = await db.query<{ n: number; d: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT p.order_id)::int AS d
     FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1`,
    [productId],
  )
  const twice = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT user_id FROM orders WHERE product_id = $1 AND status = 'confirmed'
     GROUP BY user_id HAVING count(*) > 1) t`,
    [productId],
  )
  const confirmed = new Map(
    orders.rows.filter((r) => r.status === 'confirmed').map((r) => [r.order_id, r.user_id]),
  )
  return {
    confirmed,
    failed: orders.rows.filter((r) => r.status === 'failed').length,
    payments: pay.rows[0]!.n,
    distinctPayments: pay.rows[0]!.d,
    usersTwice: twice.rows[0]!.n,
  }
}

/** Waits until `ok(probe())` (the service's one polling helper, support/eventually.ts). */
const waitFor = <T>(what: string, probe: () => Promise<T>, ok: (t: T) => boolean, timeoutMs = 90_000) =>
  eventually(probe, ok, { what, timeoutMs, intervalMs: 200 })

async function metric(url: string, name: string, labels: string): Promise<number> {
  const text = await fetch(url).then(
    (r) => r.text(),
    () => '',
  )
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`))
  return line ? Number(line.split(' ').at(-1)) : 0
}

describe('RabbitMQ path: relay with publisher confirms, consumer with manual ack, exactly once', () => {
  let stack: LocalStack
  let admin: pg.Client
  let db: pg.Client
  let rabbit: Connection
  let brokerProxy: FaultProxy
  const dbName = `fs_amqp_${RUN}`

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: PG_ADMIN_URL })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${dbName}`)
    const databaseUrl = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${dbName}`)
    rabbit = new Connection(AMQP_URL)
    const broker = new URL(AMQP_URL)
    brokerProxy = await startProxy({ host: broker.hostname, port: Number(broker.port || 5672) })
    stack = await startStack({
      queueUrl: AMQP_URL.replace(/:\d+(\/|$)/, `:${brokerProxy.port}$1`),
      databaseUrl,
      sale: { productId: '7101', stock: 50 },
      instances: 1,
      port: 0,
      lockNodes: false,
      env: {
        QUEUE_NAME: QUEUE,
        MAX_DELIVERIES: String(MAX_DELIVERIES),
        CLAIM_IDLE_MS: '2000',
        MAX_EVENT_LOOP_DELAY_MS: '2000',
      },
      echo: process.env.FS_ECHO === '1',
    })
    db = new pg.Client({ connectionString: databaseUrl })
    await db.connect()
  }, 180_000)

  // A test that fails half-way must not leave the next ones a dead worker or a cut-off broker
  // (they would each wait 90 s for what only a live worker does): every test starts with both.
  afterEach(async () => {
    brokerProxy?.reset()
    if (stack && !stack.worker.running) stack.worker.start()
    if (stack)
      await waitFor(
        'the worker to serve its metrics',
        () =>
          fetch(stack.workerMetricsUrl).then(
            (r) => r.ok,
            () => false,
          ),
        (ok) => ok,
        60_000,
      )
  }, 90_000)

  afterAll(async () => {
    await stack?.stop()
    await brokerProxy?.close()
    await db?.end()
    if (rabbit) {
      for (const queue of [QUEUE, DEAD_QUEUE]) await rabbit.queueDelete({ queue }).catch(() => {})
      await rabbit.close()
    }
    if (admin) {
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {})
      await admin.end()
    }
  }, 60_000)

  it('50 units, 120 buyers: 50 reserved (200/202) then 409; 50 confirmed orders, 50 payments, each reservation confirmed', {
    timeout: 180_000,
  }, async () => {
    const outcomes = await checkouts(stack.url, '7101', range(1, 120), 16)
    const ok = reserved(outcomes)
    expect(ok).toHaveLength(50)
    expect(outcomes.filter((o) => o.status === 409)).toHaveLength(70)
    const f = await waitFor(
      '50 orders persisted',
      () => facts(db, '7101'),
      (x) => x.confirmed.size + x.failed >= 50,
    )
    expect(f.confirmed.size).toBe(50)
    expect(f.failed).toBe(0)
    expect(f.payments).toBe(50)
    expect(f.distinctPayments).toBe(50)
    expect(f.usersTwice).toBe(0)
    for (const o of ok) {
      expect(f.confirmed.get(o.body.order_id!)).toBe(String(o.userId))
      // The status in Redis is set after the SQL write: confirmed once persisted.
      const status = await waitFor(
        `order ${o.body.order_id} confirmed`,
        () =>
          fetch(`${stack.url}/v1/orders/${o.body.order_id}`).then(
            (r) => r.json() as Promise<{ status?: string }>,
          ),
        (b) => b.status !== 'reserved',
        30_000,
      )
      expect(status).toMatchObject({
        order_id: o.body.order_id,
        status: 'confirmed',
        user_id: String(o.userId),
      })
    }
    // Drained: nothing left in the relay group, nothing in the queue.
    const q = await rabbit.queueDeclare({ queue: QUEUE, passive: true })
    expect(q.messageCount).toBe(0)
  })

  it('the worker killed with kill -9 while orders flow: persisted = reserved, no duplicate, no double charge', {
    timeout: 180_000,
  }, async () => {
    await stack.putSale({ productId: '7102', stock: 200 })
    // 100 buyers (each gets a unit) while the worker runs, killed once the first of their orders
    // are persisted (the rest in flight or not yet read); then 300 more for the 100 units left
    // while it is dead, so orders certainly wait for it, whatever the machine's speed.
    const first = checkouts(stack.url, '7102', range(1_001, 100), 16)
    await waitFor(
      'the first orders of 7102 persisted',
      () => facts(db, '7102'),
      (x) => x.confirmed.size >= 5,
    )
    await stack.worker.kill()
    const beforeKill = await first
    const whileDead = await checkouts(stack.url, '7102', range(1_101, 300), 16)
    const outcomes = [...beforeKill, ...whileDead]
    const ok = reserved(outcomes)
    expect(ok).toHaveLength(200)
    expect(outcomes.filter((o) => o.status === 409)).toHaveLength(200)
    // The 100 units sold while the worker was dead cannot be persisted yet.
    const before = await facts(db, '7102')
    expect(before.confirmed.size + before.failed).toBeLessThanOrEqual(100)
    expect(reserved(beforeKill)).toHaveLength(100)
    expect(reserved(whileDead)).toHaveLength(100)
    stack.worker.start()
    const f = await waitFor(
      '200 orders persisted after the restart',
      () => facts(db, '7102'),
      (x) => x.confirmed.size + x.failed >= 200,
    )
    expect(f.confirmed.size).toBe(200)
    expect(f.failed).toBe(0)
    expect(f.payments).toBe(200)
    expect(f.distinctPayments).toBe(200)
    expect(f.usersTwice).toBe(0)
    for (const o of ok) expect(f.confirmed.get(o.body.order_id!)).toBe(String(o.userId))
    // Redelivered messages were absorbed by persistOrder's idempotence, not persisted twice.
    const sold = await db.query<{ sold: number }>('SELECT sold FROM sales WHERE product_id = $1', ['7102'])
    expect(sold.rows[0]!.sold).toBe(200)
  })

  it('a message that keeps failing goes to the dead-letter queue after MAX_DELIVERIES, and is counted', {
    timeout: 180_000,
  }, async () => {
    const dead = () => metric(stack.workerMetricsUrl, 'flash_sale_dead_letters_total', 'product_id="7101"')
    const before = await dead()
    const pub = rabbit.createPublisher({ confirm: true })
    // unit 3,000,000,000 does not fit the orders.unit_no integer column: SQL refuses it each time.
    const poison = {
      product_id: '7101',
      entry_id: '1-1',
      fields: [
        'order_id',
        `7101.poison-${RUN}`,
        'user_id',
        'poison',
        'round',
        '1',
        'unit',
        '3000000000',
        'price_cents',
        '4999',
        'reserved_at',
        String(Date.now()),
      ],
    }
    await pub.send({ routingKey: QUEUE, durable: true, messageId: `7101.poison-${RUN}` }, poison)
    await pub.close()
    const dlq = await waitFor(
      'the poison message in the dead-letter queue',
      () => rabbit.queueDeclare({ queue: DEAD_QUEUE, passive: true }),
      (q) => q.messageCount >= 1,
    )
    expect(dlq.messageCount).toBe(1)
    await waitFor('the dead letter counted', dead, (n) => n >= before + 1, 30_000)
    expect(await dead()).toBe(before + 1)
    const ch = await rabbit.acquire()
    try {
      const msg = await ch.basicGet({ queue: DEAD_QUEUE, noAck: true })
      expect(msg?.messageId).toBe(`7101.poison-${RUN}`)
      expect(Number(msg?.headers?.['x-deliveries'])).toBeGreaterThanOrEqual(MAX_DELIVERIES)
      expect(String(msg?.headers?.['x-reason'])).toMatch(/out of range/)
    } finally {
      await ch.close()
    }
    const persisted = await db.query('SELECT 1 FROM orders WHERE order_id = $1', [`7101.poison-${RUN}`])
    expect(persisted.rowCount).toBe(0)
  })

  it('the broker cut off during checkouts: reservations go on, nothing is lost or doubled once it is back', {
    timeout: 240_000,
  }, async () => {
    await stack.putSale({ productId: '7103', stock: 100 })
    brokerProxy.refuse(true)
    brokerProxy.dropConnections()
    const outcomes = await checkouts(stack.url, '7103', range(2_001, 150), 16)
    const ok = reserved(outcomes)
    expect(ok).toHaveLength(100)
    // Unconfirmed orders stay pending in the stream: none can reach SQL while the broker is away.
    const during = await facts(db, '7103')
    expect(during.confirmed.size).toBe(0)
    const order = (await fetch(`${stack.url}/v1/orders/${ok[0]!.body.order_id}`).then((r) => r.json())) as {
      status?: string
    }
    expect(order.status).toBe('reserved')
    // The worker's stream gauges watch the relay group: all 100 wait there (pending or not yet
    // read), which also keeps the broker away for at least one gauge period (2 s).
    // flash_sale_stream_pending counts every unsettled event (delivered and not acknowledged, or
    // not delivered) from the entries; adding XINFO's lag counted the undelivered ones twice (111
    // when the relay had read 89 of the 100 before the broker went away).
    const backlog = () => metric(stack.workerMetricsUrl, 'flash_sale_stream_pending', 'product_id="7103"')
    expect(await waitFor('the relay backlog gauge at 100', backlog, (n) => n === 100)).toBe(100)
    // Longer than the client's own wait for a channel (acquireTimeout, 20 s): the publish fails
    // and the relay must keep the entries pending, not acknowledge them.
    await waitFor(
      'the relay to report the broker unavailable',
      async () => stack.worker.output.join(''),
      (out) => out.includes('orders wait in the stream'),
      90_000,
    )
    expect((await facts(db, '7103')).confirmed.size).toBe(0)
    brokerProxy.refuse(false)
    const f = await waitFor(
      '100 orders persisted after the broker came back',
      () => facts(db, '7103'),
      (x) => x.confirmed.size + x.failed >= 100,
    )
    expect(f.confirmed.size).toBe(100)
    expect(f.failed).toBe(0)
    expect(f.payments).toBe(100)
    expect(f.distinctPayments).toBe(100)
    for (const o of ok) expect(f.confirmed.get(o.body.order_id!)).toBe(String(o.userId))
    expect(await waitFor('the relay backlog gauge back to 0', backlog, (n) => n === 0)).toBe(0)
  })

  it('orders that cannot be paid fail through the queue and give their unit back once each, with the worker killed during the returns', {
    timeout: 180_000,
  }, async () => {
    const STOCK = 40
    const productId = '7105'
    await stack.putSale({ productId, stock: STOCK })
    // 240 buyers, three in four with an empty wallet (written straight to SQL): most units
    // reserved fail INSUFFICIENT_FUNDS in the consumer and go back, for the ~60 funded to buy.
    const users = range(5_001, 240)
    await db.query(
      `INSERT INTO wallets (user_id, balance_cents, funded_cents) SELECT u, 0, 0 FROM unnest($1::text[]) AS u`,
      [users.filter((u) => u % 4 !== 0).map(String)],
    )
    const load = checkouts(stack.url, productId, users, 16)
    // kill -9 once units are coming back: messages the consumer had not acknowledged come again,
    // and returns it had recorded in SQL but not yet made in Redis are resumed by the new worker.
    const atKill = await eventually(
      () => adminSale(stack, productId),
      (c) => c.returned > 0,
      { timeoutMs: 90_000, intervalMs: 20, what: 'the first units returned' },
    )
    await stack.worker.kill()
    stack.worker.start()
    const outcomes = await load
    expect(outcomes.filter((o) => ![200, 202, 409].includes(o.status))).toEqual([])
    // Units that came back after the load are bought by funded late-comers (the default wallet).
    let nextUser = 6_000
    const lateUsers: number[] = []
    const end = await eventually(
      async () => {
        const c = await adminSale(stack, productId)
        if (c.remaining > 0) {
          const wave = range(nextUser, c.remaining * 2)
          nextUser += wave.length
          lateUsers.push(...wave)
          await checkouts(stack.url, productId, wave, 16)
          return adminSale(stack, productId)
        }
        return c
      },
      (c) => c.remaining === 0 && c.pending === 0 && c.returns_pending === 0,
      { timeoutMs: 120_000, intervalMs: 250, what: 'the sale sold out, persisted, every return done' },
    )
    expect(end.persisted + end.remaining).toBe(STOCK)
    const counts = await db.query<{ done: number; returned: number; unpaid_not_back: number; paid: number }>(
      `SELECT (SELECT count(*)::int FROM orders WHERE product_id = $1 AND unit_return = 'done') AS done,
              (SELECT returned FROM sales WHERE product_id = $1) AS returned,
              (SELECT count(*)::int FROM orders WHERE product_id = $1 AND failure_reason = 'INSUFFICIENT_FUNDS'
                 AND unit_return IS DISTINCT FROM 'done') AS unpaid_not_back,
              (SELECT count(*)::int FROM orders WHERE product_id = $1 AND status = 'confirmed') AS paid`,
      [productId],
    )
    const c = counts.rows[0]!
    // Once each: SQL's count, the orders marked done and Redis's returned hash agree.
    expect(c.returned).toBeGreaterThan(atKill.returned)
    expect(c.done).toBe(c.returned)
    expect(end.returned).toBe(c.returned)
    expect(c.unpaid_not_back).toBe(0)
    expect(c.paid).toBe(STOCK)
    const money = await moneyFacts(stack.databaseUrl, [...users, ...lateUsers].map(String))
    expect(money).toMatchObject({ charged_twice: 0, negative: 0, drifting: 0, payments: STOCK })
    const q = await rabbit.queueDeclare({ queue: QUEUE, passive: true })
    expect(q.messageCount).toBe(0)
    // This sale's books (the dead-letter test above leaves its own sale a message short).
    const books = await runReconcile(stack)
    const mine = books.report.find((r) => r.product_id === productId)
    expect(mine, books.out + books.err).toBeDefined()
    expect(mine!.problems).toEqual([])
  })
})
