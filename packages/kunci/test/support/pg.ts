// The machine's PostgreSQL for the SQL side of the tests (fencedUpdate). It is required, as Redis
// is: a suite that cannot connect fails with the commands that start or install it, never skips.
import pg from 'pg'

/** TEST_PG_URL, else the local server's `postgres` database as user postgres (trust auth). */
export const PG_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

export const PG_MISSING = [
  `PostgreSQL is not reachable at ${PG_URL} (set TEST_PG_URL to use another server).`,
  'Debian/Ubuntu: sudo apt-get install -y postgresql && sudo service postgresql start',
  "(the tests connect as user postgres without a password: 'trust' for 127.0.0.1 in pg_hba.conf)",
].join('\n  ')

/** A pool on PG_URL that has answered once; throws PG_MISSING (with the cause) when it cannot. */
export async function connectPg(max = 2): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: PG_URL, max, connectionTimeoutMillis: 5_000 })
  try {
    await pool.query('SELECT 1')
    return pool
  } catch (err) {
    await pool.end().catch(() => {})
    throw new Error(PG_MISSING, { cause: err })
  }
}
