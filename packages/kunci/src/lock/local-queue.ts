import {
  AcquireAbortedError,
  ClosedError,
  LockNotAcquiredError,
  LockUnavailableError,
  type NodeVote,
} from '../errors.js'
import type { Lock } from './lock.js'
import type { ResolvedAcquireOptions } from './lock-options.js'
import type { LockTarget } from './lock-target.js'

/** A caller queued behind a holder in this process. */
export interface LocalWaiter {
  readonly ttlMs: number
  readonly driftMs: number
  /** The lock was handed over to this waiter. */
  handTo(lock: Lock): void
  /** This waiter may now try Redis itself; `wait` = the last hand-over yielded, wait before trying. */
  promote(wait: boolean): void
}

/** What the last attempt on Redis for the resource saw: the reason a queued caller gives up. */
export interface AttemptOutcome {
  /** `outage`: the nodes that failed alone ruled out a quorum (an `expired` grant counts too). */
  readonly outage: boolean
  readonly votes: readonly NodeVote[]
}

/** What a queued caller's turn brings: a handed-over lock, or its turn to try Redis. */
export type Turn = Lock | 'try' | 'wait'

export interface EnterOptions {
  readonly target: LockTarget
  readonly opts: ResolvedAcquireOptions
  readonly deadline: number
  readonly signal: AbortSignal | undefined
  readonly closed: () => boolean
}

/**
 * In-process state of one resource. Only one caller per process talks to Redis about a
 * resource at a time (the active one, or the holder handing over); the others queue here in
 * FIFO order. So N local waiters cost Redis what one waiter costs, and a release hands the lock
 * to the next local waiter in the same round trip as the release.
 *
 * A queued caller whose deadline passes is answered with what the attempts in front of it saw:
 * the caller talking to Redis can run up to nodeTimeoutMs past its own deadline (an attempt is
 * never cut short), so a waiter behind it often times out first, and must not call an outage
 * contention. When an attempt is in flight at that moment, the waiter waits for its outcome.
 */
export class LocalQueue {
  /** The lock this process holds on the resource, if any. */
  holder: Lock | undefined
  /** Consecutive hand-overs inside this process, for fairness towards other processes. */
  handoffs = 0
  readonly #waiters: LocalWaiter[] = []
  /** A caller of this process runs Redis attempts for the resource (or a hand-over is running). */
  #active = false
  /** Attempts on Redis in flight, and the callers waiting for the next one's outcome. */
  #inFlight = 0
  #onOutcome: ((o: AttemptOutcome) => void)[] = []
  #last: AttemptOutcome | undefined
  /** Fires when the holder's validity ends without a release, so waiters never wait forever. */
  #watch: NodeJS.Timeout | undefined
  readonly #onIdle: () => void

  /** `onIdle`: called when nobody holds, tries or waits any more (the owner forgets the queue). */
  constructor(onIdle: () => void) {
    this.#onIdle = onIdle
  }

  get idle(): boolean {
    return !this.holder && !this.#active && this.#waiters.length === 0
  }

  /**
   * A caller that may wait enters: `undefined` when it may try Redis now (it becomes the active
   * caller), else its place in the queue, which resolves with a handed-over lock or its turn to
   * try ('wait': the last hand-over yielded, wait before trying). Rejects when the deadline
   * passes (E_LOCK_NOT_ACQUIRED, or E_LOCK_UNAVAILABLE if the attempts in front saw an outage),
   * the signal aborts, or the manager closes.
   */
  enter(e: EnterOptions): Promise<Turn> | undefined {
    if (this.idle) {
      this.#active = true
      return undefined
    }
    const turn = this.#enqueue(e)
    this.#watchHolder()
    return turn
  }

  /** The active caller is done (granted or failed); the next waiter gets its turn. */
  leave(): void {
    this.#active = false
    this.settle()
  }

  /** An attempt on Redis for the resource starts (any caller of this process). */
  attemptStarted(): void {
    this.#inFlight++
  }

  /** ... and ends with this outcome. */
  attemptEnded(outcome: AttemptOutcome): void {
    this.#inFlight--
    this.#last = outcome
    const waiting = this.#onOutcome
    if (waiting.length === 0) return
    this.#onOutcome = []
    for (const w of waiting) w(outcome)
  }

  /** A caller of this process got the lock. */
  granted(lock: Lock): void {
    this.#last = undefined
    if (!this.holder) this.holder = lock
  }

  /**
   * The holder releases: the next waiter to hand the lock to, if the lock is still valid and
   * somebody waits; the caller then runs the hand-over (`handingOver`, then `handedOver`).
   */
  released(lock: Lock): LocalWaiter | undefined {
    if (this.holder !== lock) return undefined
    this.holder = undefined
    const next = lock.isHeld ? this.#waiters.shift() : undefined
    if (next) this.#active = true
    else this.handoffs = 0
    return next
  }

  /** The hand-over to `next` ended: with `lock` granted to it, or not (it tries itself then). */
  handedOver(next: LocalWaiter, lock: Lock | undefined, wait: boolean): void {
    this.#active = false
    if (lock) {
      this.handoffs++
      this.holder = lock
      next.handTo(lock)
    } else {
      this.handoffs = 0
      this.#active = true
      next.promote(wait)
    }
  }

  /** The hand-over failed with an error: the waiter tries Redis itself. */
  handOverFailed(next: LocalWaiter): void {
    this.#active = true
    next.promote(false)
  }

  /** The holder's validity was extended: re-arm the watch on it. */
  extended(lock: Lock): void {
    if (this.holder === lock && this.#watch) {
      clearTimeout(this.#watch)
      this.#watch = undefined
      this.#watchHolder()
    }
  }

  /** Lets the next local waiter try Redis when nobody in this process holds or tries. */
  settle(): void {
    if (this.holder || this.#active) return
    const next = this.#waiters.shift()
    if (next) {
      this.#active = true
      next.promote(false)
    } else if (this.idle) {
      clearTimeout(this.#watch)
      this.#watch = undefined
      this.#onIdle()
    }
  }

  /** The manager closes: every waiter is told so (ClosedError). */
  close(): void {
    clearTimeout(this.#watch)
    this.#watch = undefined
    for (const w of this.#waiters.splice(0)) w.promote(false)
  }

  #enqueue({ target, opts, deadline, signal, closed }: EnterOptions): Promise<Turn> {
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
        if (!this.#remove(w)) return
        cleanup()
        reject(new AcquireAbortedError(target.resources, { cause: signal!.reason }))
      }
      const timer = setTimeout(
        () => {
          if (!this.#remove(w)) return
          cleanup()
          const answer = (o: AttemptOutcome | undefined) => reject(timedOut(target, o))
          // An attempt in flight ends within nodeTimeoutMs: its outcome is the answer.
          if (this.#inFlight > 0) this.#onOutcome.push(answer)
          else answer(this.#last)
        },
        Math.max(0, deadline - performance.now()),
      )
      signal?.addEventListener('abort', onAbort, { once: true })
      this.#waiters.push(w)
    })
  }

  #remove(w: LocalWaiter): boolean {
    const i = this.#waiters.indexOf(w)
    if (i < 0) return false
    this.#waiters.splice(i, 1)
    return true
  }

  #watchHolder(): void {
    const holder = this.holder
    if (this.#watch || !holder) return
    this.#watch = setTimeout(
      () => {
        this.#watch = undefined
        const h = this.holder
        if (!h || this.#waiters.length === 0) return
        if (h.isHeld) return this.#watchHolder()
        // The holder let its validity end without releasing: stop waiting for it locally.
        this.holder = undefined
        this.handoffs = 0
        this.settle()
      },
      Math.max(0, holder.validUntil - performance.now()) + 1,
    )
    this.#watch.unref()
  }
}

/** A queued caller's deadline passed: an outage if the attempts in front of it saw one. */
function timedOut(target: LockTarget, o: AttemptOutcome | undefined): Error {
  return o?.outage
    ? new LockUnavailableError(target.resources, o.votes)
    : new LockNotAcquiredError(target.resources, 0, o?.votes ?? [])
}

/** The local queues of one lock manager, by resource name. */
export class LocalQueues {
  readonly #queues = new Map<string, LocalQueue>()

  /** The queue of `name`, created if needed; it removes itself once idle. */
  of(name: string): LocalQueue {
    let q = this.#queues.get(name)
    if (!q) {
      const created = new LocalQueue(() => {
        if (this.#queues.get(name) === created) this.#queues.delete(name)
      })
      q = created
      this.#queues.set(name, q)
    }
    return q
  }

  get(name: string): LocalQueue | undefined {
    return this.#queues.get(name)
  }

  close(): void {
    for (const q of this.#queues.values()) q.close()
    this.#queues.clear()
  }
}
