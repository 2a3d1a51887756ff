import pg from 'pg'

export type Db = pg.Pool

/** A pool with bounded waits: a checkout must fail fast (503) when SQL is down, not hang. */
export function connectDb(url: string, max = 10): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 2_000,
    idleTimeoutMillis: 10_000,
    // Statements of a checkout are short; a stuck one is a fault, not work.
    statement_timeout: 5_000,
    query_timeout: 6_000,
  })
  // An idle client that loses its connection emits 'error' on the pool; without a listener the
  // process would crash. The next query gets a new connection.
  pool.on('error', () => {})
  return pool
}

/** Runs fn in one transaction; rolls back on any error. */
export async function inTransaction<T>(db: Db, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect()
  try {
    await client.query('BEGIN')
    const result = await fn(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

/**
 * In the caller's transaction: PostgreSQL ends the session (and rolls the transaction back) after
 * `ms` idle in it, so a process stalled while holding row locks (a pay, a hold sweep) cannot hold
 * them for longer than that.
 */
export async function boundIdleTransaction(c: Pick<pg.PoolClient, 'query'>, ms = 10_000): Promise<void> {
  await c.query(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`, [String(ms)])
}

/**
 * The database could not do it now: unreachable or gone away, or the transaction was rolled back
 * for a reason of the moment, not of the data (issue 37 item 8): a statement timeout (57014, e.g.
 * a row held locked by a stalled transaction), a deadlock (40P01), a serialization failure
 * (40001). Retry later, the data is intact: the worker waits instead of counting a failed
 * delivery, a route answers 503 with Retry-After instead of 500.
 */
export function isSqlOutage(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const e = err as Error & { code?: string }
  if (
    e.code &&
    /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|57P0[1-3]|57014|40P01|40001|08...|53300)$/.test(e.code)
  )
    return true
  return /Connection terminated|timeout exceeded when trying to connect|Connection ended|Client has encountered a connection error|connect ECONNREFUSED|Query read timeout/i.test(
    e.message,
  )
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string }
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint)
}
