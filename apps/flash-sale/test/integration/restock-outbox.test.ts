// Issue 37 item 4: a restock was two commits. restock.lua ran inside the open SQL transaction, so
// a Redis that ran the script after the transaction gave up (a paused node: the call timed out,
// SQL rolled back, the script still ran once the node woke) sold units SQL did not have. Now SQL
// records the restock first with an id, Redis applies it once per id after the commit, and a
// restock Redis did not take stays pending until a worker's pass finishes it. The app through
// inject() on one real Redis node and real PostgreSQL; SIGSTOP/SIGCONT of the node.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { Restocks } from '../../src/sale/restocks.js'
import { eventually } from '../support/eventually.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'

describe('restocks: SQL first, Redis once per restock id', () => {
  let fx: InProcessApp
  let runtime: Runtime
  let app: App

  beforeAll(async () => {
    fx = await startInProcessApp('fs_restock', { ADMIN_TOKEN: TOKEN, DURABILITY: 'none' })
    runtime = fx.runtime
    app = fx.app
  }, 60_000)

  afterAll(async () => {
    fx?.node.resume()
    await fx?.close()
  })

  const admin = (method: 'PUT' | 'POST', url: string, payload: object) =>
    app.inject({ method, url, headers: { authorization: `Bearer ${TOKEN}` }, payload })
  const redisStock = async (id: string) => Number(await runtime.redis.get(saleKeys(id).stock))
  const sql = async (id: string) =>
    (
      await runtime.db.query<{ stock_total: number; sold: number }>(
        'SELECT stock_total, sold FROM sales WHERE product_id = $1',
        [id],
      )
    ).rows[0]!
  const restockRows = async (id: string) =>
    (
      await runtime.db.query<{ units: number; state: string }>(
        'SELECT units, state FROM restocks WHERE product_id = $1 ORDER BY restock_id',
        [id],
      )
    ).rows

  it('applied at once: 200, SQL and Redis grow together, the restock marked done', async () => {
    expect((await admin('PUT', '/admin/sales/rk1', { stock: 2, price: 1 })).statusCode).toBe(200)
    const res = await admin('POST', '/admin/sales/rk1/restock', { units: 3 })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json()).toMatchObject({ product_id: 'rk1', stock_total: 5, restock: 'applied', remaining: 5 })
    expect(await redisStock('rk1')).toBe(5)
    expect(await sql('rk1')).toEqual({ stock_total: 5, sold: 0 })
    expect(await restockRows('rk1')).toEqual([{ units: 3, state: 'done' }])
  })

  it("Redis paused during the restock: 202 pending, the script that runs late adds nothing SQL lacks, a worker's pass finishes it once", async () => {
    expect((await admin('PUT', '/admin/sales/rk2', { stock: 2, price: 1 })).statusCode).toBe(200)
    fx.node.pause()
    let res: Awaited<ReturnType<typeof admin>>
    try {
      res = await admin('POST', '/admin/sales/rk2/restock', { units: 4 })
    } finally {
      fx.node.resume()
    }
    // Recorded in SQL, not shown applied in Redis: the admin must not repeat it.
    expect(res.statusCode, res.body).toBe(202)
    expect(res.json()).toMatchObject({ stock_total: 6, restock: 'pending', remaining: null })
    expect(await sql('rk2')).toEqual({ stock_total: 6, sold: 0 })
    // The call the paused node received runs once it wakes: Redis never exceeds SQL.
    await eventually(
      () => redisStock('rk2'),
      (s) => s === 6,
      { what: 'the late script applied' },
    )
    expect(await restockRows('rk2')).toEqual([{ units: 4, state: 'pending' }])
    // The workers' pass (every second in each worker) applies it again: nothing more, marked done.
    const restocks = new Restocks({ db: runtime.db, store: runtime.deps.store })
    expect(await restocks.resumePending('rk2')).toBe(1)
    expect(await restocks.resumePending('rk2')).toBe(0)
    expect(await redisStock('rk2')).toBe(6)
    expect(await restockRows('rk2')).toEqual([{ units: 4, state: 'done' }])
    // And every unit sells.
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        app.inject({ method: 'POST', url: '/v1/checkout', payload: { product_id: 'rk2', user_id: `b${i}` } }),
      ),
    )
    expect(answers.filter((a) => a.statusCode === 200)).toHaveLength(6)
    expect(answers.filter((a) => a.statusCode === 409)).toHaveLength(2)
  })

  it('a restock whose round was reset before Redis took it is marked stale, never applied to the new round', async () => {
    expect((await admin('PUT', '/admin/sales/rk3', { stock: 2, price: 1 })).statusCode).toBe(200)
    fx.node.pause()
    let res: Awaited<ReturnType<typeof admin>>
    try {
      res = await admin('POST', '/admin/sales/rk3/restock', { units: 5 })
    } finally {
      fx.node.resume()
    }
    expect(res.statusCode).toBe(202)
    await eventually(
      () => redisStock('rk3'),
      (s) => s === 7,
      { what: 'the late script applied' },
    )
    // A reset: a new round with its own stock; the pending restock belonged to the old one.
    expect((await admin('PUT', '/admin/sales/rk3', { stock: 3, price: 1 })).statusCode).toBe(200)
    const restocks = new Restocks({ db: runtime.db, store: runtime.deps.store })
    expect(await restocks.resumePending('rk3')).toBe(1)
    expect(await restockRows('rk3')).toEqual([{ units: 5, state: 'stale' }])
    expect(await redisStock('rk3')).toBe(3)
    expect(await sql('rk3')).toEqual({ stock_total: 3, sold: 0 })
  })
})
