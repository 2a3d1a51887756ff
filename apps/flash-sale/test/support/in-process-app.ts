import { type RedisNode, startNodes } from '@kunci/topology'
import { type App, buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { connectDb } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { createRuntime, type Runtime } from '../../src/runtime.js'
import { createTestDatabase } from './pg.js'

/** The service in this process (app.inject), on one real Redis node and a fresh, migrated PostgreSQL database. */
export interface InProcessApp {
  app: App
  runtime: Runtime
  /** The one Redis node (no replica: pass DURABILITY=none). */
  node: RedisNode
  databaseUrl: string
  /** Closes the app and the runtime, stops the node, drops the database. */
  close(): Promise<void>
}

/**
 * Starts it with `env` on top of REDIS_URL and DATABASE_URL (give ADMIN_TOKEN and the rest).
 * The shared start of the app-level integration tests (http-contract, waiting-room-api, holds-api).
 */
export async function startInProcessApp(
  dbPrefix: string,
  env: Record<string, string>,
): Promise<InProcessApp> {
  const nodes = await startNodes({ count: 1, proxy: false })
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let runtime: Runtime | undefined
  try {
    db = await createTestDatabase(dbPrefix)
    const pool = connectDb(db.url, 1)
    await migrate(pool).finally(() => pool.end())
    const node = nodes.nodes[0]!
    runtime = await createRuntime(
      loadConfig({ REDIS_URL: `redis://${node.host}:${node.port}`, DATABASE_URL: db.url, ...env }),
    )
    const app = await buildApp(runtime.deps)
    const started = { runtime, db }
    return {
      app,
      runtime,
      node,
      databaseUrl: db.url,
      async close() {
        await app.close()
        await started.runtime.close()
        await nodes.stop()
        await started.db.drop()
      },
    }
  } catch (err) {
    await runtime?.close().catch(() => {})
    await nodes.stop().catch(() => {})
    await db?.drop().catch(() => {})
    throw err
  }
}
