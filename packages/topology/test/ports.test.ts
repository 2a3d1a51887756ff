import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { findFreePort, startNodes } from '../src/index.js'
import { AddressInUseError, ManagedNode } from '../src/node.js'
import { releasePort } from '../src/ports.js'

const HOLDER = fileURLToPath(new URL('./fixtures/port-holder.ts', import.meta.url))
// 400 of the 10,000 ports in each process: without a shared reservation about 16 would
// coincide (400 x 400 / 10,000), so a run with none is chance e^-16.
const COUNT = 400

describe('findFreePort', () => {
  it('never hands out a port that another live process holds, even while nothing listens on it', async () => {
    const holder = spawn(process.execPath, ['--import', 'tsx', HOLDER, String(COUNT)], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    try {
      const held = await new Promise<number[]>((resolve, reject) => {
        let out = ''
        holder.stdout.on('data', (d: Buffer) => {
          out += d.toString()
          if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as number[])
        })
        holder.once('exit', (code) => reject(new Error(`port holder exited with ${code}`)))
      })
      expect(new Set(held).size).toBe(COUNT)
      const mine: number[] = []
      for (let i = 0; i < COUNT; i++) mine.push(await findFreePort())
      expect(new Set(mine).size).toBe(COUNT)
      expect(mine.filter((p) => held.includes(p))).toEqual([])
      for (const p of mine) releasePort(p)
    } finally {
      holder.kill('SIGKILL')
    }
  })

  it("a node whose port is answered by another process's redis-server fails to start instead of adopting it", async () => {
    const set = await startNodes({ count: 1, proxy: false })
    const dataDir = mkdtempSync(join(tmpdir(), 'kunci-intruder-'))
    const intruder = new ManagedNode({
      name: 'intruder',
      serverPort: set.nodes[0]!.serverPort,
      dataDir,
      password: undefined,
      args: ['--save', ''],
    })
    try {
      await expect(intruder.start()).rejects.toBeInstanceOf(AddressInUseError)
      expect(intruder.running).toBe(false)
      expect(set.nodes[0]!.running).toBe(true)
    } finally {
      await intruder.dispose()
      await set.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
