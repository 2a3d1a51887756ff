// runLoad's crowd modes against the real stack (3+3 Redis Cluster, 2 service processes, a worker,
// PostgreSQL): the same users through the waiting room and straight to the checkout. What the load
// generator records per user is checked against what the service counted (its /metrics) and what
// SQL holds.
import { connectDb, type Db } from '@kunci/flash-sale'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkPhase, readLedger } from '../../src/demo/checker.js'
import { resolveDemoOptions } from '../../src/demo/demo-options.js'
import { openSqlTarget, type SqlTarget } from '../../src/demo/sql-target.js'
import { crowdFigures } from '../../src/load/crowd-figures.js'
import type { LoadOptions } from '../../src/load/load-options.js'
import type { LoadResult } from '../../src/load/result.js'
import { runLoad } from '../../src/load/run-load.js'
import { type LocalStack, startStack } from '../../src/stack/local-stack.js'
import { PG_ADMIN_URL } from '../support/pg.js'

let sql: SqlTarget
let stack: LocalStack
let db: Db

beforeAll(async () => {
  sql = await openSqlTarget(
    resolveDemoOptions({ sql: 'postgres', postgresAdminUrl: PG_ADMIN_URL }),
    'load_room',
  )
  stack = await startStack({
    strategy: 'lua',
    instances: 2,
    port: 0,
    lockNodes: false,
    databaseUrl: sql.url!,
    env: { MAX_EVENT_LOOP_DELAY_MS: '2000' },
    echo: process.env.FS_ECHO === '1',
  })
  db = connectDb(stack.databaseUrl, 2)
}, 120_000)

afterAll(async () => {
  await db?.end()
  await stack?.stop()
  await sql?.drop()
}, 60_000)

/** Sum of a counter's series on the service's /metrics (both instances), filtered by labels. */
async function counter(name: string, labels: Record<string, string> = {}): Promise<number> {
  const page = await (await fetch(stack.metricsUrl!)).text()
  let total = 0
  for (const line of page.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue
    total += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return total
}

/** Until the worker has persisted every 200 and 202 of the run (or the deadline). */
async function settled(productId: number, load: LoadResult) {
  const answered = new Set(load.orders.map((o) => o.order_id)).size
  const deadline = Date.now() + 30_000
  for (;;) {
    const ledger = await readLedger(db, String(productId))
    if (ledger.confirmed.size + ledger.failed >= answered || Date.now() > deadline) return ledger
    await new Promise((r) => setTimeout(r, 200))
  }
}

/** Order keys are decimal strings of up to 16 digits: compared as numbers. */
const compareKeys = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0)

const STOCK = 40
const USERS = 120
// 120 users arriving over 1.5 s, ids 1..120 in arrival order.
const crowd = (productId: number): LoadOptions => ({
  url: stack.url,
  productId,
  stages: [{ durationMs: 1_500, target: USERS }],
  userIdMin: 1,
  userIdMax: USERS,
  doubleClickRatio: 0.1,
  repeatRatio: 1,
  maxRetries: Number.POSITIVE_INFINITY,
  retryDelayMs: [100, 300],
  patienceMs: 30_000,
  maxDurationMs: 45_000,
})

describe('runLoad through the waiting room, on the real stack', () => {
  it('joins once per user, honours poll_after_seconds within the bounds, buys with the ticket once admitted; the records match /metrics and SQL', async () => {
    const productId = 9950
    await stack.putSale({
      productId: String(productId),
      stock: STOCK,
      perUserLimit: 1,
      waitingRoom: { admit_per_second: 40, max_admitted: STOCK, admission_seconds: 30, stock_factor: 1 },
    })
    const before = {
      join: await counter('flash_sale_waiting_room_requests_total', { op: 'join' }),
      poll: await counter('flash_sale_waiting_room_requests_total', { op: 'poll' }),
      checkout: await counter('flash_sale_checkout_requests_total'),
    }
    // The room asks waiting pages to come back in 2 s (poll_after_seconds): inside [250, 3000].
    const load = await runLoad({ ...crowd(productId), mode: 'waiting-room', pollIntervalMs: [250, 3_000] })

    expect(load.stopReason).toBe('completed')
    expect(load.users.map((u) => u.user_id)).toEqual(Array.from({ length: USERS }, (_, i) => i + 1))
    for (let i = 1; i < USERS; i++)
      expect(load.users[i]!.arrivedMs).toBeGreaterThanOrEqual(load.users[i - 1]!.arrivedMs)
    const outcomes = crowdFigures(load.users).outcomes
    expect(outcomes).toEqual({ purchased: STOCK, sold_out: USERS - STOCK })
    expect(load.totals.transportErrors).toEqual({})

    // Each buyer was admitted before it bought, and checked out only then.
    for (const u of load.users.filter((x) => x.outcome === 'purchased')) {
      expect(u.admittedMs, `user ${u.user_id}`).not.toBeNull()
      expect(u.admittedMs!).toBeGreaterThanOrEqual(u.arrivedMs)
      expect(u.outcomeMs).toBeGreaterThanOrEqual(u.admittedMs!)
      expect(u.order_id).toMatch(/.+/)
    }
    // First come, first served, in the order the service put the joins in its line (the order
    // key each ticket names): the 40 buyers are exactly the first 40 in line. The order the load
    // generator sent the joins in is only close to it (a busy machine reorders requests on their
    // way to two instances), so it is checked loosely.
    const f = crowdFigures(load.users)
    expect(load.users.every((u) => u.lineKey !== null)).toBe(true)
    const byLine = [...load.users].sort((a, b) => compareKeys(a.lineKey!, b.lineKey!))
    expect(new Set(byLine.map((u) => u.lineKey)).size).toBe(USERS)
    const firstInLine = byLine.slice(0, STOCK).map((u) => u.user_id)
    const bought = load.users.filter((u) => u.outcome === 'purchased').map((u) => u.user_id)
    expect(bought.sort((a, b) => a - b)).toEqual(firstInLine.sort((a, b) => a - b))
    expect(f.firstArrivalsShare!).toBeGreaterThan(0.5)

    // poll_after_seconds (2 s while waiting) was honoured: a user waiting W ms polled about W / 2 s
    // times, not W / 250 ms.
    for (const u of load.users.filter((x) => x.outcome === 'sold_out')) {
      const polls = u.requests - 1
      expect(polls, `user ${u.user_id}`).toBeLessThanOrEqual(
        Math.ceil((u.outcomeMs - u.arrivedMs) / 2_000) + 1,
      )
    }
    // Everyone still in line at the sell-out saw sold_out at its next poll: within 2 s (+ slack).
    expect(f.lastWaiters!.count).toBeGreaterThan(0)
    expect(f.lastWaiters!.maxMs).toBeLessThanOrEqual(3_000)

    // The service counted what the load generator sent: one join per user, every poll, every
    // checkout (double clicks included), and nothing else.
    expect(load.totals.byOp.join).toBe(USERS)
    expect((await counter('flash_sale_waiting_room_requests_total', { op: 'join' })) - before.join).toBe(
      USERS,
    )
    expect((await counter('flash_sale_waiting_room_requests_total', { op: 'poll' })) - before.poll).toBe(
      load.totals.byOp.poll,
    )
    expect((await counter('flash_sale_checkout_requests_total')) - before.checkout).toBe(
      load.totals.byOp.checkout,
    )
    expect(load.users.reduce((a, u) => a + u.requests, 0)).toBe(load.totals.requests)

    // SQL: the 40 buyers hold the 40 orders, nobody twice.
    const check = checkPhase(load, await settled(productId, load), STOCK)
    expect(check.violations).toEqual([])
    expect(check.persisted).toBe(STOCK)
    const buyers = new Set(load.users.filter((u) => u.outcome === 'purchased').map((u) => String(u.user_id)))
    const ledger = await readLedger(db, String(productId))
    expect(new Set(ledger.confirmed.values())).toEqual(buyers)
  }, 90_000)

  it('the same crowd straight to the checkout, before and after the opening: refusals retried, final answers kept', async () => {
    const productId = 9951
    // Read before the sale is set up, so that the run starts right after it.
    const before = await counter('flash_sale_checkout_requests_total')
    // Opening 2 s after the set-up, arrivals over 3 s: users come both well before the opening
    // and after it, even when the set-up and the run's start take a second on a busy machine.
    // (With the opening 1 s after and arrivals ramping up over 1.5 s, a slow start left a few
    // users, or none, arriving 500 ms ahead.)
    const opensAt = Date.now() + 2_000
    await stack.putSale({
      productId: String(productId),
      stock: STOCK,
      perUserLimit: 1,
      startsAt: new Date(opensAt),
    })
    const load = await runLoad({
      ...crowd(productId),
      mode: 'crowd',
      stages: [{ durationMs: 3_000, target: USERS }],
    })
    expect(load.stopReason).toBe('completed')
    expect(load.users.map((u) => u.user_id)).toEqual(Array.from({ length: USERS }, (_, i) => i + 1))
    expect(crowdFigures(load.users).outcomes).toEqual({ purchased: STOCK, sold_out: USERS - STOCK })
    // Users who came well before the opening were told SALE_NOT_STARTED and clicked again. The
    // opening is a wall-clock time and arrivals are counted from the run's start, which a busy
    // machine can put hundreds of ms after the sale was set up: compared on the wall clock.
    expect(load.totals.byErrorCode.SALE_NOT_STARTED).toBeGreaterThan(0)
    const early = load.users.filter((u) => load.startedAtMs + u.arrivedMs < opensAt - 500)
    expect(early.length).toBeGreaterThan(0)
    for (const u of early) expect(u.requests, `user ${u.user_id}`).toBeGreaterThanOrEqual(2)
    expect(load.users.every((u) => u.admittedMs === null && u.position === null)).toBe(true)
    expect((await counter('flash_sale_checkout_requests_total')) - before).toBe(load.totals.requests)
    const check = checkPhase(load, await settled(productId, load), STOCK)
    expect(check.violations).toEqual([])
    expect(check.persisted).toBe(STOCK)
    // Each of the 40 buyers holds exactly the order its journey names, whether that order came in
    // a 200 or (a double click's twin reserved it) in an ALREADY_PURCHASED naming it; the 80 others
    // hold none.
    const ledger = await readLedger(db, String(productId))
    const held = new Map([...ledger.confirmed].map(([orderId, userId]) => [userId, orderId]))
    const buyers = load.users.filter((u) => u.outcome === 'purchased')
    expect(new Map(buyers.map((u) => [String(u.user_id), u.order_id]))).toEqual(held)
  }, 90_000)

  it('a sale without a room: every user is told NO_WAITING_ROOM after one join, and stops', async () => {
    const productId = 9952
    await stack.putSale({ productId: String(productId), stock: STOCK, perUserLimit: 1 })
    const load = await runLoad({
      ...crowd(productId),
      mode: 'waiting-room',
      stages: [{ durationMs: 300, target: 20 }],
    })
    expect(load.users).toHaveLength(20)
    for (const u of load.users)
      expect(u).toMatchObject({ outcome: 'error', reason: 'NO_WAITING_ROOM', requests: 1 })
    expect(load.totals.byOp).toEqual({ join: 20 })
  }, 60_000)
})
