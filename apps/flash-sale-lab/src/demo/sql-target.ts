// Where a strategy's orders go: --database-url as given; else the embedded PGlite (the default:
// nothing to install; since its session-level queue it holds the demo's multi-process load), or
// a fresh database on the local PostgreSQL (`--sql postgres`, or `auto` when it answers). The
// output and the report say which one was used.
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { ResolvedDemoOptions } from './demo-options.js'
import { DemoSqlUnavailableError } from './errors.js'

export interface SqlTarget {
  /** undefined: let the stack start the embedded PGlite. */
  url: string | undefined
  /** One line for the output and the report. */
  description: string
  /** Drops the database the demo created; a no-op otherwise. */
  drop(): Promise<void>
}

const CONNECT_TIMEOUT_MS = 2_000

async function withAdmin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS })
  client.on('error', () => {})
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end().catch(() => {})
  }
}

/** A fresh database `flash_demo_<strategy>_<hex>` on the server of `adminUrl`. */
async function freshDatabase(adminUrl: string, strategy: string): Promise<SqlTarget> {
  const name = `flash_demo_${strategy}_${randomBytes(4).toString('hex')}`
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    description: `PostgreSQL ${url.host}, fresh database ${name} (dropped at the end)`,
    drop: () =>
      withAdmin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  }
}

export async function openSqlTarget(options: ResolvedDemoOptions, strategy: string): Promise<SqlTarget> {
  const noop = async () => {}
  if (options.databaseUrl !== undefined) {
    const host = new URL(options.databaseUrl).host
    return { url: options.databaseUrl, description: `PostgreSQL ${host} (--database-url)`, drop: noop }
  }
  const embedded = (why: string): SqlTarget => ({
    url: undefined,
    description: `embedded PGlite${why}`,
    drop: noop,
  })
  if (options.sql === 'embedded') return embedded('')
  try {
    return await freshDatabase(options.postgresAdminUrl, strategy)
  } catch (err) {
    if (options.sql === 'postgres')
      throw new DemoSqlUnavailableError(options.postgresAdminUrl, { cause: err })
    const host = new URL(options.postgresAdminUrl).host
    return embedded(` (--sql auto: no PostgreSQL at ${host})`)
  }
}
