import { randomBytes } from 'node:crypto'
import pg from 'pg'

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** A fresh database on the machine's PostgreSQL for one test file; drop() removes it. */
export async function createTestDatabase(prefix = 'fs'): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL })
  await admin.connect().catch((err: unknown) => {
    throw new Error(
      `PostgreSQL is not reachable at ${PG_ADMIN_URL} (set TEST_PG_URL for another server).\n` +
        '  Debian/Ubuntu: sudo apt-get install -y postgresql && sudo service postgresql start',
      { cause: err },
    )
  })
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`)
  return {
    url,
    async drop() {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL })
      await c.connect()
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await c.end()
      }
    },
  }
}
