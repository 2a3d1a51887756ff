import { type LocalStack, type StackOptions, startStack } from '@kunci/flash-sale-lab'
import { type FaultProxy, startProxy } from '@kunci/topology'
import { afterAll, beforeAll } from 'vitest'
import { createTestDatabase } from './pg.js'

// The whole local stack is the lab's (apps/flash-sale-lab), reached by its package name only;
// tests that start it by hand, or spawn the service's CLI as the stack does, take it from here.
export { type LocalStack, serviceCliPath, startStack } from '@kunci/flash-sale-lab'

export interface StackFixture {
  readonly stack: LocalStack
  /** The TCP proxy in front of PostgreSQL (with `sqlProxy: true`): refuse() = SQL down. */
  readonly sqlProxy: FaultProxy
}

/**
 * One local stack per test file on a fresh PostgreSQL database, optionally behind a fault proxy;
 * removed after the file. FS_ECHO=1 shows the service's and the worker's output.
 */
export function useStack(options: StackOptions, fixture: { db: string; sqlProxy?: boolean }): StackFixture {
  let stack: LocalStack | undefined
  let proxy: FaultProxy | undefined
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined

  beforeAll(async () => {
    db = await createTestDatabase(fixture.db)
    if (fixture.sqlProxy) proxy = await startProxy({ host: '127.0.0.1', port: 5432 })
    stack = await startStack({
      port: 0,
      echo: process.env.FS_ECHO === '1',
      ...options,
      databaseUrl: proxy ? db.url.replace(':5432/', `:${proxy.port}/`) : db.url,
      env: { MAX_EVENT_LOOP_DELAY_MS: '2000', ...options.env },
    })
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
    await proxy?.close()
    await db?.drop()
  }, 60_000)

  return {
    get stack() {
      if (!stack) throw new Error('the stack is not started (used outside a test?)')
      return stack
    },
    get sqlProxy() {
      if (!proxy) throw new Error('useStack(…, { sqlProxy: true }) was not asked for')
      return proxy
    },
  }
}
