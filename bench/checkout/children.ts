// The bench's child processes (the bare server, the stack hosts): started with `node --import
// tsx`, ready when they print one JSON line with `ready: true`, stopped with SIGTERM and, after a
// grace period, SIGKILL. Only processes started here are ever signalled.
import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export class BenchChildError extends Error {
  readonly code = 'E_BENCH_CHILD'
  constructor(message: string) {
    super(message)
    this.name = 'BenchChildError'
  }
}

export interface BenchChild<Ready> {
  readonly name: string
  readonly ready: Ready
  readonly pid: number | undefined
  /** SIGTERM, SIGKILL after graceMs; resolves once the process has exited. */
  stop(graceMs?: number): Promise<void>
}

/** Runs `bench/checkout/<script>` with `args`; rejects if it exits or stays silent past `timeoutMs`. */
export async function startChild<Ready extends { ready: true }>(
  name: string,
  script: string,
  args: string[],
  timeoutMs: number,
): Promise<BenchChild<Ready>> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url))
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path, ...args], {
    cwd: ROOT,
    // stdin is a pipe so that a stack host notices the bench dying (stdin closes) and cleans up.
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const tail: string[] = []
  child.stderr?.on('data', (chunk: Buffer) => {
    tail.push(chunk.toString())
    if (tail.length > 40) tail.shift()
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const stop = async (graceMs = 30_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
    await exited
    clearTimeout(timer)
  }
  try {
    const ready = await new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new BenchChildError(`${name} was not ready within ${timeoutMs} ms:\n${tail.join('')}`)),
        timeoutMs,
      )
      child.once('exit', (code, signal) => {
        clearTimeout(timer)
        reject(
          new BenchChildError(`${name} exited (${signal ?? code}) before it was ready:\n${tail.join('')}`),
        )
      })
      createInterface({ input: child.stdout! }).on('line', (line) => {
        let parsed: unknown
        try {
          parsed = JSON.parse(line)
        } catch {
          return
        }
        if ((parsed as { ready?: unknown }).ready === true) {
          clearTimeout(timer)
          resolve(parsed as Ready)
        }
      })
    })
    return { name, ready, pid: child.pid, stop }
  } catch (err) {
    await stop(5_000)
    throw err
  }
}
