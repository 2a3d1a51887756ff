import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { isAlive, waitFor } from './support.js'

const OWNER = fileURLToPath(new URL('./fixtures/owner.ts', import.meta.url))

describe('reaper', () => {
  it('kills the redis-servers of an owner that was SIGKILLed', async () => {
    const owner = spawn(process.execPath, ['--import', 'tsx', OWNER], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let pids: number[] = []
    let dirs: string[] = []
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = ''
        owner.stdout.on('data', (d: Buffer) => {
          out += d.toString()
          if (out.includes('\n')) resolve(out.split('\n')[0]!)
        })
        owner.once('exit', (code) => reject(new Error(`owner exited early with ${code}`)))
      })
      ;({ pids, dirs } = JSON.parse(line) as { pids: number[]; dirs: string[] })
      expect(pids).toHaveLength(2)
      expect(pids.every(isAlive)).toBe(true)

      owner.kill('SIGKILL')
      expect(await waitFor(() => pids.every((pid) => !isAlive(pid)), 2_000)).toBe(true)
      expect(await waitFor(() => dirs.every((dir) => !existsSync(dir)), 2_000)).toBe(true)
    } finally {
      owner.kill('SIGKILL')
      for (const pid of pids) if (isAlive(pid)) process.kill(pid, 'SIGKILL')
    }
  })
})
