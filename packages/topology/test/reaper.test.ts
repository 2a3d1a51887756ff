import { type ChildProcessByStdio, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { until } from '../src/index.js'
import { isAlive } from './support.js'

const OWNER = fileURLToPath(new URL('./fixtures/owner.ts', import.meta.url))

interface Owned {
  owner: ChildProcessByStdio<null, Readable, null>
  pids: number[]
  dirs: string[]
}

/** Starts the fixture and reads the pids and data dirs of the nodes it owns. */
async function startOwner(mode: 'idle' | 'exit'): Promise<Owned> {
  const owner = spawn(process.execPath, ['--import', 'tsx', OWNER, mode], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const line = await new Promise<string>((resolve, reject) => {
    let out = ''
    owner.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('\n')) resolve(out.split('\n')[0]!)
    })
    owner.once('exit', (code) =>
      out.includes('\n') ? undefined : reject(new Error(`owner exited with ${code}`)),
    )
  })
  return { owner, ...(JSON.parse(line) as { pids: number[]; dirs: string[] }) }
}

function cleanUp({ owner, pids }: Owned): void {
  owner.kill('SIGKILL')
  for (const pid of pids) if (isAlive(pid)) process.kill(pid, 'SIGKILL')
}

describe('reaper', () => {
  it('kills the redis-servers (even a paused one) and tracked helper processes of an owner that was SIGKILLed', async () => {
    const owned = await startOwner('idle')
    try {
      expect(owned.pids).toHaveLength(3) // two redis-servers and a tracked helper process
      expect(owned.pids.every(isAlive)).toBe(true)
      owned.owner.kill('SIGKILL')
      // The watchdogs poll every 200 ms.
      await until(() => owned.pids.every((pid) => !isAlive(pid)), 'the servers to be killed', 2_000)
      await until(() => owned.dirs.every((dir) => !existsSync(dir)), 'the data dirs to be removed', 2_000)
    } finally {
      cleanUp(owned)
    }
  })

  it('kills them at once when the owner calls process.exit() without stopping them', async () => {
    const owned = await startOwner('exit')
    try {
      await new Promise((resolve) =>
        owned.owner.exitCode === null ? owned.owner.once('exit', resolve) : resolve(0),
      )
      // Faster than the watchdogs could: the 'exit' handler SIGKILLs synchronously.
      await until(
        () => owned.pids.every((pid) => !isAlive(pid)),
        'the servers to be killed synchronously',
        150,
      )
      expect(owned.dirs.every((dir) => !existsSync(dir))).toBe(true)
    } finally {
      cleanUp(owned)
    }
  })
})
