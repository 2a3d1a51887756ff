// The redlock strategy's write when two lock holders overlap: one stalled past its TTL (older
// fence) and the one that got the lock after it (newer fence) have both read the sale row before
// either wrote. The full-stack test (checkout-redlock.test.ts, 5,000 checkouts) once answered 101
// × 200 for 100 units on a loaded machine: the stalled holder committed sold = 100 first, and the
// newer holder's `sold = 99 + 1` still passed the fence check. This replays that interleaving
// exactly, on real PostgreSQL, through the strategy's own transaction body (sellOne).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectDb, type Db } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import type { RefusedError } from '../../src/domain/refusals.js'
import { type CheckoutTx, OrderStore } from '../../src/orders/order-store.js'
import { sellOne } from '../../src/strategies/redlock.js'
import { createTestDatabase } from '../support/pg.js'

let db: Db
let drop: () => Promise<void>
let orders: OrderStore

beforeAll(async () => {
  const created = await createTestDatabase('fs_stale')
  drop = created.drop
  db = connectDb(created.url, 4)
  await migrate(db)
  orders = new OrderStore(db)
})
afterAll(async () => {
  await db?.end()
  await drop?.()
})

/** A transaction whose fenced write waits for `gate`: it has read the row, then stalls. */
function stalledAtWrite(tx: CheckoutTx, gate: Promise<void>, reached: () => void) {
  return {
    c: tx.c,
    sale: (p: string) => tx.sale(p),
    confirmedOrdersOf: (p: string, r: number, u: string) => tx.confirmedOrdersOf(p, r, u),
    confirm: (o: Parameters<CheckoutTx['confirm']>[0]) => tx.confirm(o),
    fenced: async (st: { text: string; values: readonly unknown[] }) => {
      reached()
      await gate
      return tx.fenced(st)
    },
  }
}

describe('redlock: overlapping holders never sell one unit twice', () => {
  it('the older holder writes first, the newer one read before it: the newer write matches no row', async () => {
    await db.query(`INSERT INTO products (product_id, name, price_cents) VALUES ('77', 'p', 0)`)
    // One unit left; the last writer held fence 4.
    await db.query(
      `INSERT INTO sales (product_id, round, stock_total, sold, fence) VALUES ('77', 1, 100, 99, 4)`,
    )

    let open!: () => void
    const gate = new Promise<void>((r) => (open = r))
    let reached!: () => void
    const atWrite = new Promise<void>((r) => (reached = r))
    // The newer holder (fence 6) reads sold = 99 and stalls before its write.
    const newer = orders
      .checkout((tx) => sellOne(stalledAtWrite(tx, gate, reached), '77', 'user-new', 6))
      .then(
        (r) => ({ ok: true as const, r }),
        (err: unknown) => ({ ok: false as const, err }),
      )
    await atWrite
    // The older holder (fence 5, its lock already expired) reads sold = 99 too, writes and commits.
    const older = await orders.checkout((tx) => sellOne(tx, '77', 'user-old', 5))
    expect(older.status).toBe('confirmed')
    open()
    const late = await newer
    expect(late.ok).toBe(false)
    expect(late.ok ? undefined : (late.err as RefusedError).refusal?.code).toBe('BUSY')

    const books = await db.query<{ sold: number; fence: string; confirmed: string }>(
      `SELECT sold, fence, (SELECT count(*) FROM orders WHERE product_id = '77' AND status = 'confirmed') AS confirmed
       FROM sales WHERE product_id = '77'`,
    )
    expect(books.rows[0]).toEqual({ sold: 100, fence: '5', confirmed: '1' })
  })
})
