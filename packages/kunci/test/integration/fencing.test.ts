/**
 * The resource side of fencing: a holder whose lock expired (it stalled) is rejected by the
 * protected resource, in Redis (fencedWrite) and in SQL (fencedUpdate on real PostgreSQL: TEST_PG_URL,
 * else the local server; it must be there, see support/pg.ts).
 */
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { fencedUpdate, fencedWrite, InvalidOptionError, Redlock, readFenced } from 'kunci'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sleep } from '../support/nodes.js'
import { connectPg } from '../support/pg.js'

let nodes: NodeSet
let clients: Redis[]
let locks: Redlock
beforeAll(async () => {
  nodes = await startNodes({ count: 3, proxy: false })
  clients = nodes.nodes.map((n) => new Redis({ port: n.port }))
  locks = new Redlock({ clients, quarantine: false, onWarning: () => {} })
})
afterAll(async () => {
  await locks?.close()
  for (const c of clients ?? []) c.disconnect()
  await nodes?.stop()
})

/** A holds, stalls past its TTL; B acquires. Returns both locks (A's is stale). */
async function staleAndFresh(resource: string) {
  const a = await locks.acquire(resource, { ttlMs: 150 })
  await sleep(250)
  const b = await locks.acquire(resource, { ttlMs: 5000 })
  expect(b.fence).toBeGreaterThan(a.fence)
  return { a, b }
}

describe('fencedWrite (data in Redis)', () => {
  it('applies the newer holder and rejects the stale one, whatever the order of arrival', async () => {
    const store = clients[0]!
    const { a, b } = await staleAndFresh('fw')
    expect(await fencedWrite(store, { key: 'rec:fw', fence: b.fence, value: 'B' })).toEqual({
      applied: true,
      fence: b.fence,
    })
    expect(await fencedWrite(store, { key: 'rec:fw', fence: a.fence, value: 'A' })).toEqual({
      applied: false,
      fence: b.fence,
    })
    expect(await fencedWrite(store, { key: 'rec:fw', fence: b.fence, value: 'B again' })).toMatchObject({
      applied: false,
    })
    expect(await readFenced(store, 'rec:fw')).toEqual({ value: 'B', fence: b.fence })
    await b.release()
    await expect(fencedWrite(store, { key: 'rec:fw', fence: 0, value: 'x' })).rejects.toBeInstanceOf(
      InvalidOptionError,
    )
  })
})

describe('fencedUpdate (data in PostgreSQL)', () => {
  // Required, like Redis: no PostgreSQL fails here with the command that installs it.
  let pool: pg.Pool
  beforeAll(async () => {
    pool = await connectPg()
  })
  afterAll(() => pool?.end())

  it('UPDATE … WHERE fence < $t changes the row for the newer holder only', async () => {
    const table = `kunci_fence_${process.pid}`
    await pool.query(
      `CREATE TABLE ${table} (id int primary key, balance int not null, fence bigint not null default 0)`,
    )
    try {
      await pool.query(`INSERT INTO ${table} (id, balance) VALUES (1, 100)`)
      const { a, b } = await staleAndFresh('sql')
      const fresh = fencedUpdate({ table, set: { balance: 70 }, where: { id: 1 }, fence: b.fence })
      expect(fresh.text).toBe(
        `UPDATE "${table}" SET "balance" = $1, "fence" = $2 WHERE "id" = $3 AND "fence" < $2`,
      )
      expect((await pool.query(fresh.text, [...fresh.values])).rowCount).toBe(1)
      const stale = fencedUpdate({ table, set: { balance: 50 }, where: { id: 1 }, fence: a.fence })
      expect((await pool.query(stale.text, [...stale.values])).rowCount).toBe(0)
      const row = await pool.query(`SELECT balance, fence FROM ${table} WHERE id = 1`)
      expect(row.rows[0]).toEqual({ balance: 70, fence: String(b.fence) })
      await b.release()
    } finally {
      await pool.query(`DROP TABLE IF EXISTS ${table}`)
    }
  })
})
