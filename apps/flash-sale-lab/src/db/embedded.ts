import { mkdirSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import { SessionQueue } from './session-queue.js'

/**
 * The embedded SQL default: PGlite (PostgreSQL compiled to WASM, from npm, no server to install)
 * behind pglite-socket, which speaks the PostgreSQL wire protocol. The service and the workers
 * connect with the same `pg` driver and migrations as to a real PostgreSQL, as separate
 * processes. Chosen over better-sqlite3 because the SQL (and kunci's fencedUpdate) stays
 * PostgreSQL; the price is one connection at a time inside PGlite, which the socket server
 * multiplexes session by session (session-queue.ts): fine for a local stack, not for production.
 */
export interface EmbeddedSql {
  readonly url: string
  stop(): Promise<void>
}

export interface EmbeddedSqlOptions {
  /** Where PGlite keeps its files. @defaultValue in memory */
  dataDir?: string
  /** @defaultValue a free port */
  port?: number
  /**
   * 'session' (ours) or 'package' (pglite-socket's own, per message). Only the test that shows why
   * ours exists uses 'package'. @defaultValue 'session'
   */
  multiplexing?: 'session' | 'package'
}

export async function startEmbeddedSql(opts: EmbeddedSqlOptions = {}): Promise<EmbeddedSql> {
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true })
  const db = await PGlite.create(opts.dataDir)
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: opts.port ?? 0, maxConnections: 64 })
  // Session-level exclusivity instead of the package's per-message interleaving (see session-queue.ts).
  if (opts.multiplexing !== 'package') {
    ;(server as unknown as { queryQueue: SessionQueue }).queryQueue = new SessionQueue(db)
  }
  await server.start()
  const address = (server as unknown as { server: { address(): AddressInfo } }).server.address()
  let stopped: Promise<void> | undefined
  return {
    url: `postgres://postgres@127.0.0.1:${address.port}/postgres`,
    stop: () =>
      (stopped ??= (async () => {
        await server.stop()
        await db.close()
      })()),
  }
}
