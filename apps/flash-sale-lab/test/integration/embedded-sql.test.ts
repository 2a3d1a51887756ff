import { migrate } from '@kunci/flash-sale'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { startEmbeddedSql } from '../../src/db/embedded.js'
import { answers, wire, wireConnect } from '../support/pg-wire.js'

const port = (url: string) => Number(new URL(url).port)

/**
 * Several pools (as the service instances and the worker are several processes) sending
 * parameterised queries and transactions at once through the embedded PGlite's socket.
 * Returns the errors seen and whether every answer matched its own question.
 */
async function hammer(
  url: string,
  waits: { queryMs: number; connectMs: number },
): Promise<{ errors: string[]; wrong: number }> {
  const pools = Array.from(
    { length: 3 },
    () =>
      new pg.Pool({
        connectionString: url,
        max: 6,
        query_timeout: waits.queryMs,
        connectionTimeoutMillis: waits.connectMs,
      }),
  )
  const errors: string[] = []
  let wrong = 0
  try {
    await pools[0]!.query('CREATE TABLE IF NOT EXISTS counters (id int PRIMARY KEY, n int NOT NULL)')
    await pools[0]!.query('INSERT INTO counters VALUES (1, 0) ON CONFLICT DO NOTHING')
    await Promise.all(
      Array.from({ length: 600 }, async (_, i) => {
        const pool = pools[i % pools.length]!
        try {
          if (i % 3 === 0) {
            const c = await pool.connect()
            try {
              await c.query('BEGIN')
              await c.query('UPDATE counters SET n = n + $1 WHERE id = $2', [1, 1])
              await c.query('COMMIT')
            } finally {
              c.release()
            }
          } else {
            const r = await pool.query<{ v: number; s: string }>('SELECT $1::int * 2 AS v, $2::text AS s', [
              i,
              `q${i}`,
            ])
            if (r.rows[0]?.v !== i * 2 || r.rows[0]?.s !== `q${i}`) wrong++
          }
        } catch (err) {
          errors.push((err as Error).message)
        }
      }),
    )
    try {
      const n = (await pools[0]!.query<{ n: number }>('SELECT n FROM counters WHERE id = 1')).rows[0]?.n
      if (n !== 200) errors.push(`counter is ${n}, expected 200 committed increments`)
    } catch (err) {
      errors.push((err as Error).message)
    }
  } finally {
    for (const p of pools) await p.end().catch(() => {})
  }
  return { errors, wrong }
}

describe('embedded SQL (PGlite behind its socket server)', () => {
  it('keeps the connections of several pools apart: every parameterised query and transaction is its own', async () => {
    const sql = await startEmbeddedSql()
    try {
      const db = new pg.Pool({ connectionString: sql.url, max: 1 })
      expect(await migrate(db)).toContain('001_init.sql')
      await db.end()
      // The 600 operations queue in the pools (18 connections, one engine): a pool's wait for a
      // free connection is unbounded, since its length says how busy the machine is, not whether
      // the connections are kept apart (beside a CPU-bound process, with 3 s bounds, a run once failed 493 of them).
      // Each query's own wait stays bounded, so a wedged session still fails the test.
      const { errors, wrong } = await hammer(sql.url, { queryMs: 20_000, connectMs: 0 })
      expect(errors).toEqual([])
      expect(wrong).toBe(0)
    } finally {
      await sql.stop()
    }
  })

  /** Two raw connections, each past its startup (ReadyForQuery). */
  async function twoSessions(url: string) {
    const sessions = [await wireConnect(port(url)), await wireConnect(port(url))] as const
    for (const s of sessions) {
      await s.send(wire.startup())
      await s.until('Z')
    }
    return sessions
  }

  it('pglite-socket on its own interleaves protocol messages of different connections (why session-queue.ts exists)', async () => {
    const sql = await startEmbeddedSql({ multiplexing: 'package' })
    const [a, b] = await twoSessions(sql.url)
    try {
      // The order a random hammer only sometimes produces, forced: A's Parse has run (its
      // ParseComplete came back) when B's whole query arrives, and only then A's Bind. PGlite is one
      // session, so its unnamed statement is now B's, and the package's queue (per message, FIFO
      // outside a transaction) lets A run it.
      await a.send(wire.parse("SELECT 'A'::text AS who"), wire.flush())
      await a.until('1')
      await b.send(wire.parse("SELECT 'B'::text AS who"), wire.bind(), wire.execute(), wire.sync())
      expect(answers(await b.until('Z'))).toEqual({ rows: ['B'], errors: [] })
      await a.send(wire.bind(), wire.execute(), wire.sync())
      expect(answers(await a.until('Z'))).toEqual({ rows: ['B'], errors: [] })
    } finally {
      a.close()
      b.close()
      await sql.stop()
    }
  })

  it('the session queue holds the other connection back from the Parse to the Sync', async () => {
    const sql = await startEmbeddedSql()
    const [a, b] = await twoSessions(sql.url)
    try {
      // The same bytes in the same order as above; B's query cannot complete before A's Sync here,
      // so A's Bind is sent without waiting for B's answer.
      await a.send(wire.parse("SELECT 'A'::text AS who"), wire.flush())
      await a.until('1')
      await b.send(wire.parse("SELECT 'B'::text AS who"), wire.bind(), wire.execute(), wire.sync())
      await a.send(wire.bind(), wire.execute(), wire.sync())
      expect(answers(await a.until('Z'))).toEqual({ rows: ['A'], errors: [] })
      expect(answers(await b.until('Z'))).toEqual({ rows: ['B'], errors: [] })
    } finally {
      a.close()
      b.close()
      await sql.stop()
    }
  })
})
