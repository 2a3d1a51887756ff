import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { HeldLock, LockDriver } from './driver.js'
import { percentile } from './stats.js'

/** Fresh per run so that no key is ever reused across phases, rounds or reruns. */
function keyPrefix(tag: string): string {
  return `bench:${tag}:${randomBytes(4).toString('hex')}`
}

function errorName(err: unknown): string {
  return err instanceof Error ? err.name : typeof err
}

function countInto(map: Record<string, number>, name: string): void {
  map[name] = (map[name] ?? 0) + 1
}

export interface UncontendedResult {
  ops: number
  opsPerSec: number
  failures: number
  failuresByError: Record<string, number>
  elapsedMs: number
}

/**
 * `concurrency` loops, each acquiring a never-used key and releasing it at once, until the
 * deadline; ops/s counts completed acquire+release pairs over the time until the last loop ends.
 */
export async function runUncontended(
  driver: LockDriver,
  opts: { concurrency: number; durationMs: number; tag: string },
): Promise<UncontendedResult> {
  const prefix = keyPrefix(opts.tag)
  let next = 0
  let ops = 0
  let failures = 0
  const failuresByError: Record<string, number> = {}
  const start = performance.now()
  const deadline = start + opts.durationMs
  const loop = async () => {
    while (performance.now() < deadline) {
      try {
        const lock = await driver.acquire(`${prefix}:${next++}`)
        await lock.release()
        ops++
      } catch (err) {
        failures++
        countInto(failuresByError, errorName(err))
      }
    }
  }
  await Promise.all(Array.from({ length: opts.concurrency }, loop))
  const elapsedMs = performance.now() - start
  return { ops, opsPerSec: (ops / elapsedMs) * 1000, failures, failuresByError, elapsedMs }
}

interface Hold {
  calledAt: number
  acquiredAt: number
  releasedAt: number
}

export interface ContendedResult {
  /** Successful acquisitions whose lock was granted before the deadline. */
  acquisitions: number
  acquisitionsPerSec: number
  /** All successful acquisitions, including those granted while the last waiters drained. */
  totalAcquisitions: number
  failures: number
  failuresByError: Record<string, number>
  releaseFailures: number
  /** Wait percentiles over every acquire call, failed ones included at the time they gave up. */
  waitP50Ms: number
  waitP99Ms: number
  waitMaxMs: number
  handoffP50Ms: number
  handoffP99Ms: number
  /** Hand-offs where the next grant's reply was processed before the previous release's reply. */
  negativeHandoffs: number
}

/**
 * `workers` loops on ONE key: call acquire (the library's own retry/wait), hold ~holdMs, release,
 * repeat until the deadline. Workers already waiting at the deadline finish their turn, so the
 * longest waits are kept, not cut off; throughput counts only grants before the deadline.
 * Worker i uses drivers[i % drivers.length]: one shared driver, or one per worker.
 */
export async function runContended(
  drivers: readonly LockDriver[],
  opts: { workers: number; holdMs: number; durationMs: number; tag: string },
): Promise<ContendedResult> {
  const key = keyPrefix(opts.tag)
  const holds: Hold[] = []
  /** Time from calling acquire to its rejection: a caller that gave up waited this long too. */
  const failedWaits: number[] = []
  let failures = 0
  let releaseFailures = 0
  const failuresByError: Record<string, number> = {}
  const start = performance.now()
  const deadline = start + opts.durationMs
  const worker = async (_: unknown, index: number) => {
    const driver = drivers[index % drivers.length]!
    while (performance.now() < deadline) {
      const calledAt = performance.now()
      let lock: HeldLock
      try {
        lock = await driver.acquire(key)
      } catch (err) {
        failedWaits.push(performance.now() - calledAt)
        failures++
        countInto(failuresByError, errorName(err))
        continue
      }
      const hold: Hold = { calledAt, acquiredAt: performance.now(), releasedAt: Number.NaN }
      holds.push(hold)
      await sleep(opts.holdMs)
      try {
        await lock.release()
      } catch {
        releaseFailures++
      }
      hold.releasedAt = performance.now()
    }
  }
  await Promise.all(Array.from({ length: opts.workers }, worker))

  const waits = [...holds.map((h) => h.acquiredAt - h.calledAt), ...failedWaits]
  const ordered = [...holds].sort((a, b) => a.acquiredAt - b.acquiredAt)
  const handoffs: number[] = []
  let negativeHandoffs = 0
  for (let i = 1; i < ordered.length; i++) {
    const gap = ordered[i]!.acquiredAt - ordered[i - 1]!.releasedAt
    if (gap < 0) negativeHandoffs++
    handoffs.push(Math.max(0, gap))
  }
  const acquisitions = holds.filter((h) => h.acquiredAt <= deadline).length
  return {
    acquisitions,
    acquisitionsPerSec: (acquisitions / opts.durationMs) * 1000,
    totalAcquisitions: holds.length,
    failures,
    failuresByError,
    releaseFailures,
    waitP50Ms: percentile(waits, 50),
    waitP99Ms: percentile(waits, 99),
    waitMaxMs: percentile(waits, 100),
    handoffP50Ms: percentile(handoffs, 50),
    handoffP99Ms: percentile(handoffs, 99),
    negativeHandoffs,
  }
}
