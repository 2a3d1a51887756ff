import type { AcquireOptions, KunciError, Redlock } from 'kunci'
import type { History } from './history.js'
import { sleep } from './nodes.js'

export interface WorkloadOptions {
  /** One per simulated pod, each with its own connections. */
  readonly managers: readonly Redlock[]
  readonly workersPerManager: number
  readonly resources: readonly string[]
  readonly durationMs: number
  readonly history: History
  readonly acquire: AcquireOptions
  /** How long a holder keeps the lock, in ms. @defaultValue 1–3 ms */
  readonly holdMs?: () => number
}

export interface WorkloadResult {
  readonly acquired: number
  /** Failed acquisitions and releases by error code. */
  readonly errors: Record<string, number>
}

/**
 * Workers loop for durationMs: acquire a random resource, record the hold, keep it briefly,
 * end the recorded hold, release. Every outcome is counted; nothing is swallowed silently.
 */
export async function runWorkload(o: WorkloadOptions): Promise<WorkloadResult> {
  const end = performance.now() + o.durationMs
  const holdMs = o.holdMs ?? (() => 1 + Math.random() * 2)
  let acquired = 0
  const errors: Record<string, number> = {}
  const count = (err: unknown) => {
    const code = (err as KunciError).code ?? `uncoded:${(err as Error).message}`
    errors[code] = (errors[code] ?? 0) + 1
  }
  const worker = async (m: Redlock, id: string) => {
    while (performance.now() < end) {
      const resource = o.resources[Math.floor(Math.random() * o.resources.length)]!
      let lock: Awaited<ReturnType<Redlock['acquire']>>
      try {
        lock = await m.acquire(resource, o.acquire)
      } catch (err) {
        count(err)
        await sleep(5)
        continue
      }
      acquired++
      const done = o.history.begin(resource, lock.fence, id, lock.validityMs)
      await sleep(holdMs())
      done()
      try {
        await lock.release()
      } catch (err) {
        count(err)
      }
    }
  }
  await Promise.all(
    o.managers.flatMap((m, i) =>
      Array.from({ length: o.workersPerManager }, (_, j) => worker(m, `m${i}w${j}`)),
    ),
  )
  return { acquired, errors }
}
