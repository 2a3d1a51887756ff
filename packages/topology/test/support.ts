import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis, type RedisOptions } from 'ioredis'

/** A client that fails fast instead of reconnecting forever, so a dead node cannot hang a test. */
export function client(port: number, opts: RedisOptions = {}): Redis {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...opts,
  })
  // Failed commands reject on their own; the 'error' event would only add noise.
  c.on('error', () => {})
  return c
}

/** Alive and not a zombie (PID 1 in a container may never reap orphans). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z'
  } catch {
    return true // no procfs: kill -0 is all we have
  }
}

/** Resolves 'pending' if the promise has not settled within ms. */
export function settledWithin<T>(p: Promise<T>, ms: number): Promise<'settled' | 'pending'> {
  return Promise.race([
    p.then(
      () => 'settled' as const,
      () => 'settled' as const,
    ),
    sleep(ms).then(() => 'pending' as const),
  ])
}
