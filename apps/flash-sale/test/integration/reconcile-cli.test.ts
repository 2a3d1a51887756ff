// `flash-sale reconcile` never hangs: with its Redis unreachable (ioredis retries a Cluster for
// ever) it gives up after --timeout-ms and exits 2, "nothing was checked", instead of running
// until someone kills it (a hung reconcile outlived a failed test run by hours once).
import { spawn } from 'node:child_process'
import { serviceCliPath } from '@kunci/flash-sale-lab'
import { findFreePort } from '@kunci/topology'
import { describe, expect, it } from 'vitest'
import { PG_ADMIN_URL } from '../support/pg.js'

describe('flash-sale reconcile', () => {
  it('exits 2 within its timeout when Redis does not answer', async () => {
    const port = await findFreePort()
    const started = Date.now()
    const result = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const child = spawn(process.execPath, [serviceCliPath(), 'reconcile', '--timeout-ms', '1500'], {
        env: { ...process.env, REDIS_CLUSTER_NODES: `127.0.0.1:${port}`, DATABASE_URL: PG_ADMIN_URL },
      })
      let err = ''
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString()
      })
      const guard = setTimeout(() => child.kill('SIGKILL'), 30_000)
      child.on('exit', (code) => {
        clearTimeout(guard)
        resolve({ code, err })
      })
    })
    expect(result.code, result.err).toBe(2)
    expect(result.err).toContain('could not read Redis and SQL within 1500 ms')
    expect(Date.now() - started).toBeLessThan(20_000)
  })

  it('refuses a timeout that is not a positive integer', async () => {
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, [serviceCliPath(), 'reconcile', '--timeout-ms', 'soon'], {
        env: { ...process.env, REDIS_CLUSTER_NODES: '127.0.0.1:1', DATABASE_URL: PG_ADMIN_URL },
        stdio: 'ignore',
      })
      child.on('exit', resolve)
    })
    expect(code).toBe(2)
  })
})
