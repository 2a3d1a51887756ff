// sales.returned counts a round's returns once each, even when a reset commits while a return of
// the old round is being marked done. Found by the fault generator (seed 5, beside a CPU burner):
// reconcile said "sales.returned = 70 but 69 orders' returns are done" for a sale reset while
// refunds of its first round were settling. markReturned read the round from its statement's
// snapshot (round 1) and incremented the row as the reset had just left it (round 2, returned 0).
//
// Forced on real PostgreSQL: the reset's transaction has updated the sale's row and is held open;
// markReturned starts and is seen waiting on a lock; then the reset commits.
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { writeSale } from '../../src/sql/sales.js'
import { markReturned } from '../../src/sql/unit-returns.js'
import { eventually } from '../support/eventually.js'
import { createTestDatabase } from '../support/pg.js'

let db: Db
let url: string
let drop: () => Promise<void>

beforeAll(async () => {
  const database = await createTestDatabase('fs_returned_count')
  url = database.url
  drop = database.drop
  db = connectDb(url, 4)
  await migrate(db)
})

afterAll(async () => {
  await db?.end()
  await drop?.()
})

const SALE = {
  productId: 'rc1',
  stock: 5,
  priceCents: 100,
  name: undefined,
  startsAt: undefined,
  endsAt: undefined,
  perUserLimit: 1,
}

it("a return of the old round, marked done while a reset commits, is not counted in the new round's returned", async () => {
  await writeSale(db, SALE)
  // A refunded order of round 1 whose unit Redis has taken back: its return is to be marked done.
  await db.query(
    `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, unit_return)
       VALUES ('rc1.a', 'rc1', 1, 'u1', 1, 100, 'refunded', 'lua', 'pending')`,
  )

  // The reset, held open after its update of the sale's row.
  const reset = new pg.Client({ connectionString: url })
  await reset.connect()
  try {
    await reset.query('BEGIN')
    expect((await writeSale(reset, SALE)).round).toBe(2)
    const marking = markReturned(db, ['rc1.a'], ['rc1.a'], 'rc1')
    // markReturned waits for the sale's row (the old code waited there too, at its increment).
    await eventually(
      async () =>
        (
          await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%sales%'`,
          )
        ).rows[0]!.n,
      (n) => n === 1,
      { what: 'markReturned waiting for the sale row', timeoutMs: 30_000 },
    )
    await reset.query('COMMIT')
    await marking
  } finally {
    await reset.end()
  }

  const sale = (await db.query('SELECT round, returned FROM sales WHERE product_id = $1', ['rc1'])).rows[0]
  expect(sale).toEqual({ round: 2, returned: 0 })
  const order = (await db.query("SELECT unit_return FROM orders WHERE order_id = 'rc1.a'")).rows[0]
  expect(order).toEqual({ unit_return: 'done' })
})

it('a return of the current round is counted once, however often it is marked', async () => {
  await writeSale(db, { ...SALE, productId: 'rc2' })
  await db.query(
    `INSERT INTO orders (order_id, product_id, round, user_id, unit_no, price_cents, status, strategy, unit_return)
       VALUES ('rc2.a', 'rc2', 1, 'u1', 1, 100, 'refunded', 'lua', 'pending')`,
  )
  await Promise.all([1, 2, 3].map(() => markReturned(db, ['rc2.a'], ['rc2.a'], 'rc2')))
  await markReturned(db, ['rc2.a'], ['rc2.a'], 'rc2')
  const sale = (await db.query('SELECT returned FROM sales WHERE product_id = $1', ['rc2'])).rows[0]
  expect(sale).toEqual({ returned: 1 })
})
