// Issue 16 on real PostgreSQL, at the worker's and the redlock checkout's SQL: the guarded charge
// (a charge taken once per order, never overdrawing) next to the naive wallet kept for contrast,
// under the same concurrent load; INSUFFICIENT_FUNDS orders that do not take `sold` and give their
// unit up (unit_return pending); hold sales persisted as reserved with pay_by.
import { until } from '@kunci/topology'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { RefusedError } from '../../src/domain/refusals.js'
import type { OrderEvent } from '../../src/orders/order-event.js'
import { OrderStore } from '../../src/orders/order-store.js'
import { setBalance } from '../../src/sql/wallets.js'
import { createTestDatabase } from '../support/pg.js'

const PRICE = 1_000

let db: Db
let dbUrl: string
let drop: () => Promise<void>
let orders: OrderStore

async function newSale(productId: string, stock: number): Promise<void> {
  await db.query(`INSERT INTO products (product_id, name, price_cents) VALUES ($1, 'p', $2)`, [
    productId,
    PRICE,
  ])
  await db.query(`INSERT INTO sales (product_id, round, stock_total) VALUES ($1, 1, $2)`, [productId, stock])
}

const event = (productId: string, userId: string, n = 1): OrderEvent => ({
  orderId: `${productId}.${userId}.${n}`,
  productId,
  userId,
  round: 1,
  unit: n,
  priceCents: PRICE,
  reservedAtMs: Date.now(),
})

/** Funds each user with exactly one unit's price (the wallet rows exist before the load). */
async function fund(users: readonly string[], cents = PRICE): Promise<void> {
  if (users.length === 1) {
    await setBalance(db, users[0]!, cents, 0) // the admin's path
    return
  }
  await db.query(
    `INSERT INTO wallets (user_id, balance_cents, funded_cents) SELECT u, $2, $2 FROM unnest($1::text[]) AS u`,
    [users, cents],
  )
}

interface WalletFacts {
  /** Users with more than one payment. */
  chargedTwice: number
  /** Wallets whose balance ≠ funded − (sum of their payments): a charge without its debit. */
  debitMissing: number
  negative: number
  payments: number
}

async function walletFacts(users: readonly string[]): Promise<WalletFacts> {
  const r = await db.query<WalletFacts>(
    `SELECT
       (SELECT count(*)::int FROM (SELECT user_id FROM payments WHERE user_id = ANY($1) GROUP BY user_id HAVING count(*) > 1) t) AS "chargedTwice",
       (SELECT count(*)::int FROM wallets w WHERE w.user_id = ANY($1) AND w.balance_cents <>
          w.funded_cents - (SELECT coalesce(sum(amount_cents), 0) FROM payments p WHERE p.user_id = w.user_id)) AS "debitMissing",
       (SELECT count(*)::int FROM wallets WHERE user_id = ANY($1) AND balance_cents < 0) AS negative,
       (SELECT count(*)::int FROM payments WHERE user_id = ANY($1)) AS payments`,
    [users],
  )
  return r.rows[0]!
}

beforeAll(async () => {
  const t = await createTestDatabase('fs_wallet')
  drop = t.drop
  dbUrl = t.url
  db = connectDb(t.url, 8)
  await migrate(db)
  orders = new OrderStore(db, { defaultWalletCents: 0 })
})

afterAll(async () => {
  await db?.end()
  await drop?.()
})

describe('the guarded wallet next to the naive one, under the same load', () => {
  // Each round: 100 users funded for exactly one unit buy one unit from each of two sales, the two
  // sales' batches persisted at once (two workers). The source articles' race: both read the
  // balance, both pass, both deduct.
  const ROUNDS = 6
  const USERS = 100

  /**
   * A session of the test's that holds `users`' wallet rows until `release()`. Plain reads pass
   * it; the naive debit, which locks the rows it read (FOR UPDATE) before writing them, waits.
   */
  async function holdWallets(users: readonly string[]) {
    const c = new pg.Client({ connectionString: dbUrl })
    await c.connect()
    await c.query('BEGIN')
    // NO KEY: the batches' foreign-key checks (KEY SHARE) pass it, their FOR UPDATE does not.
    await c.query('SELECT 1 FROM wallets WHERE user_id = ANY($1) FOR NO KEY UPDATE', [users])
    const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid
    let released = false
    return {
      /**
       * Sessions waiting at the naive debit's lock (on this one, or on each other behind it):
       * they have read the balances.
       */
      async waitingToDebit(): Promise<number> {
        // Asked outside the holding transaction, whose view of pg_stat_activity is a snapshot.
        const r = await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND pid <> $1 AND wait_event_type = 'Lock' AND query LIKE 'SELECT 1 FROM wallets WHERE user_id = ANY($1)%FOR UPDATE'`,
          [pid],
        )
        return r.rows[0]!.n
      },
      async release(): Promise<void> {
        if (released) return
        released = true
        await c.query('COMMIT').catch(() => {})
        await c.end()
      },
    }
  }

  /**
   * One round: each user buys from two sales whose batches are persisted at once. `forceRace`
   * holds both batches between their read of the balances and their write until both have read.
   */
  async function load(strategy: 'naive' | 'lua', round: number, forceRace = false) {
    const users = Array.from({ length: USERS }, (_, i) => `${strategy}-r${round}-u${i}`)
    await fund(users)
    const [a, b] = [`${strategy}-a${round}`, `${strategy}-b${round}`]
    await newSale(a, USERS)
    await newSale(b, USERS)
    const hold = forceRace ? await holdWallets(users) : undefined
    try {
      const batches = Promise.all([
        orders.persistBatch(
          users.map((u) => event(a, u)),
          strategy,
        ),
        orders.persistBatch(
          users.map((u) => event(b, u)),
          strategy,
        ),
      ])
      if (hold) {
        await until(
          async () => (await hold.waitingToDebit()) === 2,
          'both batches to read the balances and wait to debit them',
          60_000,
        )
        await hold.release()
      }
      await batches
    } finally {
      await hold?.release()
    }
    return walletFacts(users)
  }

  it('naive: users are charged twice for one debit (balance ≠ funded − charged); guarded: never, one payment each, balance 0', async () => {
    // The race forced: both batches read every balance before either writes, so every user passes
    // the check twice and the second write overwrites the first.
    const naive = [await load('naive', 0, true)]
    expect(naive[0]).toEqual({ chargedTwice: USERS, debitMissing: USERS, negative: 0, payments: 2 * USERS })
    // Unforced, the rounds show whatever overlap the machine gave (counted, not asserted).
    for (let r = 1; r < ROUNDS; r++) naive.push(await load('naive', r))
    console.info(
      `naive, unforced rounds: ${naive
        .slice(1)
        .map((f) => f.chargedTwice)
        .join(', ')} users charged twice`,
    )
    const guarded: WalletFacts[] = []
    for (let r = 0; r < ROUNDS; r++) guarded.push(await load('lua', r))
    // The CHECK stays: the naive writes are what each reader thought was left, never below 0.
    expect(naive.every((f) => f.negative === 0)).toBe(true)
    for (const f of guarded) {
      expect(f).toEqual({ chargedTwice: 0, debitMissing: 0, negative: 0, payments: USERS })
    }
    const balances = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM wallets WHERE user_id LIKE 'lua-%' AND balance_cents <> 0`,
    )
    expect(balances.rows[0]!.n).toBe(0)
  })
})

describe('insufficient funds and held orders at the worker', () => {
  it('an order the wallet cannot pay fails INSUFFICIENT_FUNDS, does not take sold, gives its unit up; the others in the batch are charged', async () => {
    await newSale('f1', 10)
    await fund(['f1-rich'], 3 * PRICE)
    await fund(['f1-poor'], PRICE - 1)
    // The rich user buys 3 units and a fourth (per-user limit aside): the balance covers 3.
    const batch = [
      event('f1', 'f1-rich', 1),
      event('f1', 'f1-poor', 1),
      event('f1', 'f1-rich', 2),
      event('f1', 'f1-rich', 3),
      event('f1', 'f1-rich', 4),
    ]
    const outcomes = await orders.persistBatch(batch, 'lua')
    expect(outcomes).toEqual([
      { kind: 'confirmed' },
      { kind: 'failed', reason: 'INSUFFICIENT_FUNDS' },
      { kind: 'confirmed' },
      { kind: 'confirmed' },
      { kind: 'failed', reason: 'INSUFFICIENT_FUNDS' },
    ])
    const sale = await db.query('SELECT sold FROM sales WHERE product_id = $1', ['f1'])
    expect(sale.rows[0].sold).toBe(3)
    const failed = await db.query(
      `SELECT order_id, status, failure_reason, unit_return FROM orders WHERE product_id = 'f1' AND status = 'failed' ORDER BY order_id`,
    )
    expect(failed.rows).toEqual([
      {
        order_id: 'f1.f1-poor.1',
        status: 'failed',
        failure_reason: 'INSUFFICIENT_FUNDS',
        unit_return: 'pending',
      },
      {
        order_id: 'f1.f1-rich.4',
        status: 'failed',
        failure_reason: 'INSUFFICIENT_FUNDS',
        unit_return: 'pending',
      },
    ])
    const w = await db.query(
      `SELECT user_id, balance_cents::int AS b, charged_cents::int AS c, charges FROM wallets WHERE user_id LIKE 'f1-%' ORDER BY user_id`,
    )
    expect(w.rows).toEqual([
      { user_id: 'f1-poor', b: PRICE - 1, c: 0, charges: 0 },
      { user_id: 'f1-rich', b: 0, c: 3 * PRICE, charges: 3 },
    ])
    // Delivered again: nothing changes, and the failed orders say their unit is still to be returned.
    const again = await orders.persistBatch(batch, 'lua')
    expect(again[1]).toEqual({ kind: 'duplicate', status: 'failed', returnPending: 'INSUFFICIENT_FUNDS' })
    expect(again[0]).toEqual({ kind: 'duplicate', status: 'confirmed' })
    expect((await walletFacts(['f1-rich', 'f1-poor'])).payments).toBe(3)
  })

  it('an order refused for funds still uses up the unit SQL had for it: a later event past the stock is sold_out_in_sql, not sold with the unit that goes back', async () => {
    // SQL has 1 unit left; Redis (ahead after a failover) sold 2: one of them does not exist.
    await newSale('s1', 2)
    await db.query(`UPDATE sales SET sold = 1 WHERE product_id = 's1'`)
    await fund(['s1-poor'], 0)
    await fund(['s1-rich'], 10 * PRICE)
    expect(await orders.persistBatch([event('s1', 's1-poor'), event('s1', 's1-rich')], 'lua')).toEqual([
      { kind: 'failed', reason: 'INSUFFICIENT_FUNDS' },
      { kind: 'failed', reason: 'sold_out_in_sql' },
    ])
    // The poor order's unit goes back to Redis (pending): stock 2 = sold 1 + that unit.
    const sale = await db.query(`SELECT sold FROM sales WHERE product_id = 's1'`)
    expect(sale.rows[0].sold).toBe(1)
  })

  it('a user without a wallet pays with the default balance (DEFAULT_WALLET_BALANCE); 0 refuses', async () => {
    await newSale('f2', 10)
    const funded = new OrderStore(db, { defaultWalletCents: 2 * PRICE })
    expect(await funded.persistBatch([event('f2', 'f2-new', 1)], 'lua')).toEqual([{ kind: 'confirmed' }])
    const w = await db.query(
      `SELECT balance_cents::int AS b, funded_cents::int AS f FROM wallets WHERE user_id = 'f2-new'`,
    )
    expect(w.rows[0]).toEqual({ b: PRICE, f: 2 * PRICE })
    expect(await orders.persistBatch([event('f2', 'f2-none', 1)], 'lua')).toEqual([
      { kind: 'failed', reason: 'INSUFFICIENT_FUNDS' },
    ])
  })

  it('a hold sale: the order is reserved until reserved_at + hold_seconds, takes sold, is not charged', async () => {
    await newSale('h1', 2)
    await db.query(`UPDATE sales SET payment = 'hold', hold_seconds = 600 WHERE product_id = 'h1'`)
    const at = Date.now()
    const batch = ['h1-a', 'h1-b', 'h1-c'].map((u) => ({ ...event('h1', u), reservedAtMs: at }))
    expect(await orders.persistBatch(batch, 'lua')).toEqual([
      { kind: 'reserved' },
      { kind: 'reserved' },
      { kind: 'failed', reason: 'sold_out_in_sql' },
    ])
    const rows = await db.query<{ status: string; pay_by: Date | null; unit_return: string | null }>(
      `SELECT status, pay_by, unit_return FROM orders WHERE product_id = 'h1' ORDER BY order_id`,
    )
    expect(rows.rows.map((r) => r.status)).toEqual(['reserved', 'reserved', 'failed'])
    expect(rows.rows[0]!.pay_by!.getTime()).toBe(at + 600_000)
    expect(rows.rows[2]).toMatchObject({ pay_by: null, unit_return: null })
    expect((await db.query(`SELECT sold FROM sales WHERE product_id = 'h1'`)).rows[0].sold).toBe(2)
    expect((await walletFacts(['h1-a', 'h1-b', 'h1-c'])).payments).toBe(0)
  })

  it('a unit reserved twice for one user fails duplicate_unit and gives its unit up', async () => {
    await newSale('d1', 10)
    await fund(['d1-u'], 5 * PRICE)
    const first = event('d1', 'd1-u', 1)
    const twice = { ...first, orderId: 'd1.twice' }
    expect(await orders.persistBatch([first, twice], 'lua')).toEqual([
      { kind: 'confirmed' },
      { kind: 'failed', reason: 'duplicate_unit' },
    ])
    const row = await db.query(`SELECT unit_return FROM orders WHERE order_id = 'd1.twice'`)
    expect(row.rows[0].unit_return).toBe('pending')
  })
})

describe('the redlock checkout transaction', () => {
  it('a wallet that does not cover the price: INSUFFICIENT_FUNDS, and the transaction leaves nothing behind', async () => {
    await newSale('r1', 5)
    await fund(['r1-poor'], PRICE - 1)
    const attempt = orders.checkout(async (tx) => {
      await db.query('SELECT 1') // another connection: the checkout's own writes are in tx
      await tx.c.query(`UPDATE sales SET sold = sold + 1 WHERE product_id = 'r1'`)
      await tx.confirm({
        orderId: 'r1.o1',
        productId: 'r1',
        round: 1,
        userId: 'r1-poor',
        unitNo: 1,
        priceCents: PRICE,
        strategy: 'redlock',
      })
    })
    await expect(attempt).rejects.toBeInstanceOf(RefusedError)
    await expect(attempt).rejects.toMatchObject({ refusal: { code: 'INSUFFICIENT_FUNDS' } })
    const left = await db.query(
      `SELECT (SELECT sold FROM sales WHERE product_id = 'r1') AS sold,
              (SELECT count(*)::int FROM orders WHERE product_id = 'r1') AS orders,
              (SELECT balance_cents::int FROM wallets WHERE user_id = 'r1-poor') AS balance`,
    )
    expect(left.rows[0]).toEqual({ sold: 0, orders: 0, balance: PRICE - 1 })
  })
})
