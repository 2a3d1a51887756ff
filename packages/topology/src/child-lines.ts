/**
 * Line-by-line talk with a child process over its stdout: the storm children of kunci's cache
 * tests and of bench/cache use it to say "ready" and to report.
 */
import type { ChildProcess } from 'node:child_process'
import { createInterface } from 'node:readline'

/** Returns a function that resolves with the child's next stdout line (rejects if it exits first). */
export function lineReader(child: ChildProcess): () => Promise<string> {
  const queue: string[] = []
  const waiting: { resolve(line: string): void; reject(err: Error): void }[] = []
  let ended = false
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const w = waiting.shift()
    if (w) w.resolve(line)
    else queue.push(line)
  })
  child.on('close', (code, signal) => {
    ended = true
    for (const w of waiting.splice(0))
      w.reject(new Error(`child exited (${code ?? signal}) before answering`))
  })
  return () => {
    const line = queue.shift()
    if (line !== undefined) return Promise.resolve(line)
    if (ended) return Promise.reject(new Error('child has exited'))
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }))
  }
}
