import { setTimeout as sleep } from 'node:timers/promises'
import { KunciError } from 'kunci'
import type { History } from './history.js'
import type { Pod } from './pods.js'
import type { AccountStore } from './store.js'

export const RESOURCE = 'account:1'

/** A write this close to the lock's end could land after it: skip it, as a careful service would. */
const MIN_VALIDITY_FOR_WRITE_MS = 50

export interface WorkerStats {
  /** Writes the workers believe they made. */
  writes: number
  /** Fenced writes the store refused although the lock was still valid: never expected. */
  rejectedWhileValid: number
  /** Holds that ended (signal aborted, validity too short) before the write was sent. */
  skipped: number
  /** Acquire failures by error code: E_LOCK_NOT_ACQUIRED is contention, E_LOCK_UNAVAILABLE an outage. */
  failures: Map<string, number>
  unexpected: Error[]
}

export function newStats(): WorkerStats {
  return { writes: 0, rejectedWhileValid: 0, skipped: 0, failures: new Map(), unexpected: [] }
}

/** Reading, thinking, then writing back: the window in which an unprotected update gets lost. */
function think(): Promise<void> {
  return sleep(1 + Math.floor(Math.random() * 3))
}

/** Read-modify-write with no lock and no fence. */
export async function unlockedWorker(store: AccountStore, stats: WorkerStats, stop: AbortSignal) {
  while (!stop.aborted) {
    const balance = await store.readBalance()
    await think()
    await store.plainWrite(balance + 1)
    stats.writes++
  }
}

/** Read-modify-write under the lock, writing through the store's fence check. */
export async function lockedWorker(opts: {
  name: string
  pod: Pod
  store: AccountStore
  history: History
  stats: WorkerStats
  /** Ends the loop; also cancels an acquire that is waiting, so the demo stops at once. */
  stop: AbortSignal
}) {
  const { name, pod, store, history, stats, stop } = opts
  while (!stop.aborted) {
    try {
      await pod.redlock.using(
        RESOURCE,
        { retryCount: 200, retryDelayMs: 50, retryJitterMs: 50, acquireTimeoutMs: 5_000, signal: stop },
        async (signal, lock) => {
          const start = performance.now()
          const validEnd = start + lock.validityMs
          const balance = await store.readBalance()
          await think()
          if (signal.aborted || lock.validityMs < MIN_VALIDITY_FOR_WRITE_MS) {
            stats.skipped++
            return
          }
          const r = await store.fencedWrite(balance + 1, lock.fence)
          if (r.applied) stats.writes++
          else stats.rejectedWhileValid++
          history.add({ worker: name, fence: lock.fence, start, end: Math.min(performance.now(), validEnd) })
        },
      )
    } catch (err) {
      if (err instanceof KunciError && err.code === 'E_LOCK_ABORTED') return
      if (err instanceof KunciError) {
        stats.failures.set(err.code, (stats.failures.get(err.code) ?? 0) + 1)
        // An outage: give the nodes a moment instead of spinning on failed attempts.
        await sleep(50)
      } else {
        stats.unexpected.push(err as Error)
        return
      }
    }
  }
}
