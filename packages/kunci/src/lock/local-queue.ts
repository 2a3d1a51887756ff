import { AcquireAbortedError, ClosedError, LockNotAcquiredError } from '../errors.js'
import type { Lock } from './lock.js'
import type { ResolvedAcquireOptions } from './lock-options.js'
import type { LockTarget } from './node-ops.js'

/** A caller queued behind a holder in this process. */
export interface LocalWaiter {
  readonly ttlMs: number
  readonly driftMs: number
  /** The lock was handed over to this waiter. */
  handTo(lock: Lock): void
  /** This waiter may now try Redis itself; `wait` = the last hand-over yielded, wait before trying. */
  promote(wait: boolean): void
}

/**
 * In-process state of one resource. Only one caller per process talks to Redis about a
 * resource at a time (the active one, or the holder handing over); the others queue here in
 * FIFO order. So N local waiters cost Redis what one waiter costs, and a release hands the lock
 * to the next local waiter in the same round trip as the release.
 */
export class ResourceQueue {
  holder: Lock | undefined
  /** A caller of this process is running Redis attempts for the resource. */
  active = false
  readonly waiters: LocalWaiter[] = []
  /** Consecutive hand-overs inside this process, for fairness towards other processes. */
  handoffs = 0
  /** Fires when the holder's validity ends without a release, so waiters never wait forever. */
  watch: NodeJS.Timeout | undefined

  get idle(): boolean {
    return !this.holder && !this.active && this.waiters.length === 0
  }

  /**
   * Queues a caller behind the local holder or active caller. Resolves with a handed-over lock,
   * or with its turn to try Redis ('wait': the last hand-over yielded, wait before trying).
   * Rejects when the deadline passes, the signal aborts, or the manager closes.
   */
  enqueue(
    target: LockTarget,
    opts: ResolvedAcquireOptions,
    deadline: number,
    signal: AbortSignal | undefined,
    closed: () => boolean,
  ): Promise<Lock | 'try' | 'wait'> {
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', onAbort)
      }
      const w: LocalWaiter = {
        ttlMs: opts.ttlMs,
        driftMs: opts.driftMs,
        handTo: (lock) => {
          cleanup()
          resolve(lock)
        },
        promote: (wait) => {
          cleanup()
          if (closed()) reject(new ClosedError('This lock manager'))
          else resolve(wait ? 'wait' : 'try')
        },
      }
      const onAbort = () => {
        if (!this.remove(w)) return
        cleanup()
        reject(new AcquireAbortedError(target.resources, { cause: signal!.reason }))
      }
      const timer = setTimeout(
        () => {
          if (!this.remove(w)) return
          cleanup()
          reject(new LockNotAcquiredError(target.resources, 0, []))
        },
        Math.max(0, deadline - performance.now()),
      )
      signal?.addEventListener('abort', onAbort, { once: true })
      this.waiters.push(w)
    })
  }

  remove(w: LocalWaiter): boolean {
    const i = this.waiters.indexOf(w)
    if (i < 0) return false
    this.waiters.splice(i, 1)
    return true
  }
}
