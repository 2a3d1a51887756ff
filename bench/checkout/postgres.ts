// A fresh PostgreSQL database per stack, created before the run and dropped after it, so the
// bench never touches anybody else's data and leaves nothing behind.
import { randomBytes } from 'node:crypto'
import pg from 'pg'

/** @defaultValue the shared server of this machine and CI (user postgres, trust). */
export const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432'

export class BenchDatabaseError extends Error {
  readonly code = 'E_BENCH_DATABASE'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'BenchDatabaseError'
  }
}

export interface BenchDatabases {
  version: string
  /** Creates `kunci_bench_checkout_<random>_<label>` and returns its URL. */
  create(label: string): Promise<string>
  /** Drops every database created here (FORCE: a stopped stack's last connections may linger). */
  dropAll(): Promise<void>
}

export async function connectDatabases(serverUrl = DEFAULT_POSTGRES_URL): Promise<BenchDatabases> {
  const admin = new pg.Client({ connectionString: `${serverUrl}/postgres` })
  try {
    await admin.connect()
  } catch (err) {
    throw new BenchDatabaseError(
      `cannot reach PostgreSQL at ${serverUrl} (${(err as Error).message}); start it or pass --postgres <url>`,
      { cause: err },
    )
  }
  const version = ((await admin.query('SHOW server_version')).rows[0] as { server_version: string })
    .server_version
  const run = randomBytes(4).toString('hex')
  const created: string[] = []
  return {
    version,
    async create(label) {
      const name = `kunci_bench_checkout_${run}_${label.replace(/[^a-z0-9]/g, '_')}`
      await admin.query(`CREATE DATABASE ${name}`)
      created.push(name)
      return `${serverUrl}/${name}`
    },
    async dropAll() {
      for (const name of created.splice(0)) {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((err: Error) => {
          process.stderr.write(`could not drop database ${name}: ${err.message}\n`)
        })
      }
      await admin.end()
    },
  }
}
