import { readdirSync, readFileSync } from 'node:fs'
import { type Db, inTransaction } from './database.js'

const DIR = new URL('./migrations/', import.meta.url)
// Any constant works; it keeps two processes from migrating at once (pg_advisory_xact_lock).
const MIGRATION_LOCK = 7_351_211

/** Applies the migrations not yet applied, in order, each in its own transaction. Returns their names. */
export async function migrate(db: Db): Promise<string[]> {
  await db.query(
    'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
  )
  const files = readdirSync(DIR)
    .filter((f) => f.endsWith('.sql'))
    .sort()
  const applied: string[] = []
  for (const name of files) {
    const done = await inTransaction(db, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      const seen = await c.query('SELECT 1 FROM schema_migrations WHERE name = $1', [name])
      if (seen.rowCount) return false
      await c.query(readFileSync(new URL(name, DIR), 'utf8'))
      await c.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name])
      return true
    })
    if (done) applied.push(name)
  }
  return applied
}
