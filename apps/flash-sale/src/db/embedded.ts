import { mkdirSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'

/**
 * The embedded SQL default: PGlite (PostgreSQL compiled to WASM, from npm, no server to install)
 * behind pglite-socket, which speaks the PostgreSQL wire protocol. The service and the workers
 * connect with the same `pg` driver and migrations as to a real PostgreSQL, as separate
 * processes. Chosen over better-sqlite3 because the SQL (and kunci's fencedUpdate) stays
 * PostgreSQL; the price is one connection at a time inside PGlite, which the socket server
 * multiplexes transaction by transaction: fine for a local stack, not for production.
 */
export interface EmbeddedSql {
  readonly url: string
  stop(): Promise<void>
}

export async function startEmbeddedSql(opts: { dataDir?: string; port?: number } = {}): Promise<EmbeddedSql> {
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true })
  const db = await PGlite.create(opts.dataDir)
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: opts.port ?? 0, maxConnections: 64 })
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
