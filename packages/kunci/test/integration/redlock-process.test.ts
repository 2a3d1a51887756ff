/**
 * Tests that need a second OS process: a lock holder paused (SIGSTOP) past its TTL, and a
 * process that must exit on its own after using the library (no leaked timers or sockets).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { fencedWrite, Redlock, readFenced } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sleep } from '../support/nodes.js'

let nodes: NodeSet
let store: NodeSet
beforeAll(async () => {
  nodes = await startNodes({ count: 5, proxy: false })
  store = await startNodes({ count: 1, proxy: false })
})
afterAll(async () => {
  await nodes?.stop()
  await store?.stop()
})

function child(fixture: string, arg: object): { proc: ChildProcess; lines: AsyncIterator<string> } {
  const file = fileURLToPath(new URL(`../fixtures/${fixture}`, import.meta.url))
  const proc = spawn(process.execPath, ['--import', 'tsx', file, JSON.stringify(arg)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  return { proc, lines }
}
async function next(lines: AsyncIterator<string>): Promise<Record<string, unknown>> {
  const r = await lines.next()
  if (r.done) throw new Error('child ended early')
  return JSON.parse(r.value) as Record<string, unknown>
}
function exited(proc: ChildProcess, ms: number): Promise<number | null | 'timeout'> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode)
    const t = setTimeout(() => resolve('timeout'), ms)
    proc.once('exit', (code) => {
      clearTimeout(t)
      resolve(code)
    })
  })
}

describe('a client paused past its TTL', () => {
  it('has its signal aborted when it resumes, and its fenced write is rejected', async () => {
    const ports = nodes.nodes.map((n) => n.port)
    const storePort = store.nodes[0]!.port
    const { proc, lines } = child('paused-holder.ts', { ports, storePort })
    const clients = ports.map((port) => new Redis({ port }))
    const storeClient = new Redis({ port: storePort })
    const locks = new Redlock({ clients, quarantine: false, onWarning: () => {} })
    try {
      const first = await next(lines)
      expect(first.holding).toBe(true)
      proc.kill('SIGSTOP') // a GC pause, a VM stall: the holder cannot extend
      await sleep(900)
      const lock = await locks.acquire('account', { ttlMs: 2000, retryCount: 20, retryDelayMs: 50 })
      expect(lock.fence).toBeGreaterThan(first.fence as number)
      const mine = await fencedWrite(storeClient, {
        key: 'account',
        fence: lock.fence,
        value: 'written-by-new-holder',
      })
      expect(mine.applied).toBe(true)
      proc.kill('SIGCONT')
      const report = await next(lines)
      expect(report.abortedBeforeWrite).toBe(true)
      expect(report.reason).toBe('E_LOCK_LOST')
      expect(report.applied).toBe(false)
      expect(report.storedFence).toBe(lock.fence)
      expect(await readFenced(storeClient, 'account')).toEqual({
        value: 'written-by-new-holder',
        fence: lock.fence,
      })
      await lock.release()
      expect(await exited(proc, 5000)).toBe(0)
    } finally {
      proc.kill('SIGKILL')
      await locks.close()
      for (const c of clients) c.disconnect()
      storeClient.disconnect()
    }
  })
})

describe('process lifecycle', () => {
  it('a process that used every lock feature exits on its own after close()', async () => {
    const { proc, lines } = child('clean-exit.ts', { ports: nodes.nodes.map((n) => n.port) })
    try {
      const report = await next(lines)
      expect(report).toEqual({ done: true, aborted: 'E_LOCK_ABORTED' })
      expect(await exited(proc, 5000)).toBe(0)
    } finally {
      proc.kill('SIGKILL')
    }
  })
})
