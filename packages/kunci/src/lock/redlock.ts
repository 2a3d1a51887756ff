import {
  AcquireAbortedError,
  ClosedError,
  InvalidOptionError,
  LockLostError,
  LockNotAcquiredError,
  LockUnavailableError,
} from '../errors.js'
import type { KunciClient } from '../redis/client.js'
import {
  ACQUIRED_CHANNEL,
  CONTENTION_CHANNEL,
  EXTENDED_CHANNEL,
  FAILED_CHANNEL,
  hasSubscribers,
  LOST_CHANNEL,
  publishEvent,
  RELEASED_CHANNEL,
} from './events.js'
import { FenceClock } from './fence-clock.js'
import { type LocalQueue, LocalQueues, type LocalWaiter } from './local-queue.js'
import { Lock, type LockOwner } from './lock.js'
import {
  type AcquireOptions,
  type LockManagerOptions,
  type ResolvedAcquireOptions,
  type ResolvedManagerOptions,
  resolveAcquireOptions,
  resolveManagerOptions,
  type UsingOptions,
} from './lock-options.js'
import { buildTarget, type LockTarget, resolveClients } from './lock-target.js'
import { NodeLink, type Nodes, SOLO_MAX_BATCH } from './node-link.js'
import { type AttemptResult, attemptAcquire } from './node-ops.js'
import { extendAll, releaseAll } from './node-release.js'
import { provenGone, quorumOf } from './quorum.js'
import { ReleaseNotifier } from './release-notifier.js'
import { SendOrder } from './send-order.js'
import { randomToken } from './tokens.js'
import { runUsing } from './using.js'

export interface RedlockOptions extends LockManagerOptions {
  /**
   * One client per independent Redis master (not replicas of each other): ioredis `Redis`, or
   * node-redis v5 `createClient()` connected first (see "Clients" in docs/locks.md).
   */
  clients: readonly KunciClient[]
}

/** One caller's run of attempts on Redis. */
interface AcquireRun {
  readonly target: LockTarget
  readonly opts: ResolvedAcquireOptions
  readonly deadline: number
  readonly signal: AbortSignal | undefined
  /** The last hand-over in front of it yielded: wait a retry delay before the first attempt. */
  readonly waitFirst: boolean
  /** Its resource's local queue, told each attempt's outcome (single-resource callers). */
  readonly queue?: LocalQueue | undefined
}

/** Poll interval of a caller queued on the nodes (a release wakes it; this is the safety net). */
const QUEUED_POLL_MS = 500

/** Fence retries without delay when a proposal was too low; each observes a higher token. */
const MAX_FENCE_RETRIES = 3

/**
 * Redlock over N independent Redis nodes: a lock is held when ⌊N/2⌋+1 nodes granted it, for
 * ttl − elapsed − drift. Every grant carries a fencing token that increases from holder to
 * holder. Restarted nodes sit out for maxTtlMs. See docs/locks.md for the algorithm and what
 * holds under which fault.
 *
 * The manager closes only the connections it created (pub/sub subscribers), never `clients`.
 */
export class Redlock implements LockOwner {
  readonly quorum: number
  protected readonly nodes: Nodes
  protected readonly options: ResolvedManagerOptions
  #links: NodeLink[]
  #notifier: ReleaseNotifier
  #local = new LocalQueues()
  #closed = false
  /** This manager's name in the nodes' wait queues (one Redis-level waiter per resource per manager). */
  #waiterId = randomToken().slice(0, 16)

  constructor(options: RedlockOptions) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOptionError('options', 'expected an object with at least { clients }')
    }
    const clients = resolveClients(options.clients)
    this.options = resolveManagerOptions(options)
    const o = this.options
    const solo = clients.length === 1
    this.quorum = quorumOf(clients.length)
    const order = new SendOrder(clients.length, this.quorum)
    this.#links = clients.map(
      (c, i) => new NodeLink(i, c, o, solo ? SOLO_MAX_BATCH : undefined, solo ? undefined : order),
    )
    this.nodes = {
      links: this.#links,
      quorum: this.quorum,
      nodeTimeoutMs: o.nodeTimeoutMs,
      clock: new FenceClock(),
      order,
    }
    this.#notifier = new ReleaseNotifier(clients, this.#waiterId)
  }

  /**
   * Acquires `resources` (all or none), waiting behind other holders as the retry options allow.
   * Rejects with `LockNotAcquiredError` (contention), `LockUnavailableError` (no quorum of nodes
   * reachable), `AcquireAbortedError` (signal) or `InvalidOptionError`.
   */
  async acquire(resources: string | readonly string[], options?: AcquireOptions): Promise<Lock> {
    if (this.#closed) throw new ClosedError('This lock manager')
    const target = this.target(resources)
    const opts = options === undefined ? this.options.acquire : resolveAcquireOptions(options, this.options)
    const signal = options?.signal
    if (signal?.aborted) throw new AcquireAbortedError(target.resources, { cause: signal.reason })
    const deadline = performance.now() + opts.acquireTimeoutMs
    if (target.resources.length > 1)
      return this.#acquireLoop({ target, opts, deadline, signal, waitFirst: false })

    const q = this.#local.of(target.resources[0]!)
    // retryCount 0 means one attempt now, even if a local caller is ahead of us.
    const direct = opts.retryCount === 0
    let waitFirst = false
    const turn = direct ? undefined : q.enter({ target, opts, deadline, signal, closed: () => this.#closed })
    if (turn) {
      const outcome = await turn
      if (outcome instanceof Lock) return outcome
      waitFirst = outcome === 'wait'
    }
    try {
      const lock = await this.#acquireLoop({ target, opts, deadline, signal, waitFirst, queue: q })
      q.granted(lock)
      return lock
    } finally {
      if (direct) q.settle()
      else q.leave()
    }
  }

  /**
   * Runs `fn` under the lock, extending it before it expires. `signal` aborts when the lock is
   * lost, its validity ends unextended, or maxHoldMs passes. The lock is released afterwards;
   * a release failure is reported on the `kunci:lock:lost` channel and never hides `fn`'s
   * result or error.
   */
  async using<T>(
    resources: string | readonly string[],
    options: UsingOptions | undefined,
    fn: (signal: AbortSignal, lock: Lock) => Promise<T>,
  ): Promise<T> {
    if (typeof fn !== 'function')
      throw new InvalidOptionError('fn', 'expected a function (signal, lock) => Promise')
    return runUsing(this, this.options, resources, options ?? {}, fn, this.options.nodeTimeoutMs)
  }

  /** Stops waiters with `ClosedError` and closes the subscriber connections kunci opened. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#local.close()
    for (const l of this.#links) l.detach()
    await this.#notifier.close()
  }

  /** @internal */
  async release(lock: Lock): Promise<void> {
    const q = lock.resources.length === 1 ? this.#local.get(lock.resources[0]!) : undefined
    const next = q?.released(lock)
    if (q && next) return this.#handOver(q, lock, next)
    try {
      const r = await releaseAll(this.nodes, lock.target, lock.token)
      const ok = r.released >= this.quorum
      lock.markEnded(ok ? 'released' : 'lost')
      publishEvent(RELEASED_CHANNEL, { resources: lock.resources, fence: lock.fence, ok, votes: r.votes })
      if (ok) return
      // The hand-over's rule: lost only when so many nodes proved our token gone that it cannot
      // be on a quorum. Nodes that did not answer (time-out, packet loss) prove nothing.
      if (!provenGone(r.answered - r.released, this.nodes.links.length, this.quorum)) {
        throw new LockUnavailableError(lock.resources, r.votes)
      }
      publishEvent(LOST_CHANNEL, { resources: lock.resources, fence: lock.fence, reason: 'release' })
      throw new LockLostError(lock.resources, 'it had expired or was taken over before release', r.votes)
    } finally {
      q?.settle()
    }
  }

  /** @internal */
  async extend(lock: Lock, ttlMs: number): Promise<void> {
    const opts = resolveAcquireOptions({ ttlMs }, this.options)
    if (!lock.isHeld) {
      lock.markEnded('lost')
      throw new LockLostError(lock.resources, 'its validity had already ended')
    }
    const r = await extendAll(this.nodes, {
      target: lock.target,
      token: lock.token,
      fence: lock.fence,
      ttlMs: opts.ttlMs,
    })
    const validUntil = r.start + opts.ttlMs - opts.driftMs
    if (r.extended >= this.quorum && validUntil > performance.now()) {
      lock.markExtended(validUntil, opts.ttlMs)
      publishEvent(EXTENDED_CHANNEL, { resources: lock.resources, fence: lock.fence, ttlMs: opts.ttlMs })
      if (lock.resources.length === 1) this.#local.get(lock.resources[0]!)?.extended(lock)
      return
    }
    if (r.answered < this.quorum && r.extended + (r.votes.length - r.answered) >= this.quorum) {
      // Not enough answers to know: the lock may still be ours until its current validity ends.
      throw new LockUnavailableError(lock.resources, r.votes)
    }
    lock.markEnded('lost')
    publishEvent(LOST_CHANNEL, { resources: lock.resources, fence: lock.fence, reason: 'extend' })
    throw new LockLostError(lock.resources, 'a quorum of nodes no longer holds it', r.votes)
  }

  /** Validates resources and builds their keys. Overridden by the single-node lock for cluster checks. */
  protected target(resources: string | readonly string[]): LockTarget {
    return buildTarget(this.options.prefix, resources)
  }

  /** Hook for the single-node lock (WAIT for replicas); `undefined` when there is nothing to wait for. */
  protected afterGrant(_lock: Lock): Promise<void> | undefined {
    return undefined
  }

  async #acquireLoop({ target, opts, deadline, signal, waitFirst, queue }: AcquireRun): Promise<Lock> {
    const started = performance.now()
    if (waitFirst) await this.#notifier.wait(target.lockKeys, this.#retryDelay(opts, deadline, 1), signal)
    let attempts = 0
    let fenceRetries = 0
    // A caller that may retry queues on the nodes when it finds the lock held, so a release
    // wakes the longest waiter only instead of every waiting process at once.
    const waiter = opts.retryCount > 0 ? { id: this.#waiterId, since: Date.now(), queued: false } : undefined
    try {
      for (;;) {
        if (signal?.aborted) throw new AcquireAbortedError(target.resources, { cause: signal.reason })
        if (this.#closed) throw new ClosedError('This lock manager')
        attempts++
        this.#notifier.attemptStarted(target.lockKeys)
        let r: AttemptResult | undefined
        queue?.attemptStarted()
        try {
          r = await attemptAcquire(this.nodes, { target, ttlMs: opts.ttlMs, driftMs: opts.driftMs, waiter })
        } finally {
          // A grant leaves the queues (the script removed us). Any other attempt may have queued
          // us on some node: one that found the lock held queues the waiter even when the attempt
          // as a whole came back an outage (a slow node), fenced, or threw; so giving up (an
          // abort, a deadline) leaves the queues after any of them, not only after 'held'.
          if (waiter) waiter.queued = r?.kind !== 'granted'
          this.#notifier.attemptEnded(target.lockKeys)
          // What the callers queued behind us give up with, if their deadline passes now.
          queue?.attemptEnded(
            r === undefined
              ? { outage: true, votes: [] }
              : { outage: r.kind === 'outage' || r.kind === 'expired', votes: r.votes },
          )
        }
        if (r.kind === 'granted') {
          this.#notifier.granted(target.lockKeys) // drop wakes kept during the attempt
          const lock = new Lock(this, target, r.token, r.fence, opts.ttlMs, r.validUntil)
          if (signal?.aborted) {
            await releaseAll(this.nodes, target, r.token)
            lock.markEnded('released')
            throw new AcquireAbortedError(target.resources, { cause: signal.reason })
          }
          const confirming = this.afterGrant(lock)
          if (confirming) await confirming
          if (hasSubscribers(ACQUIRED_CHANNEL)) {
            publishEvent(ACQUIRED_CHANNEL, {
              resources: target.resources,
              fence: r.fence,
              attempts,
              durationMs: performance.now() - started,
            })
          }
          return lock
        }
        if (r.kind === 'fenced' && fenceRetries < MAX_FENCE_RETRIES) {
          fenceRetries++
          attempts--
          continue
        }
        if (r.kind === 'held')
          publishEvent(CONTENTION_CHANNEL, { resources: target.resources, attempt: attempts })
        const now = performance.now()
        if (attempts > opts.retryCount || now >= deadline)
          throw this.#failure(target, r, attempts, now - started)
        let delay = this.#retryDelay(opts, deadline, attempts)
        // Queued behind a holder, we are woken in turn by a release naming us; polling then only
        // covers a holder that crashed (its TTL) or a lost message, so it can be rare.
        if (r.kind === 'held' && waiter)
          delay = Math.max(delay, Math.min(QUEUED_POLL_MS, deadline - performance.now()))
        // The holder's key expires after pttl even if its release never comes. (-1: no holder
        // reported a TTL, e.g. a foreign key without expiry: nothing to wait for.)
        if (r.kind === 'held' && r.pttl >= 0 && r.pttl + 1 < delay) delay = r.pttl + 1
        await this.#notifier.wait(target.lockKeys, delay, signal)
      }
    } finally {
      if (waiter?.queued) this.#leaveQueues(target)
    }
  }

  /** Best effort: a caller that gave up should not be woken in turn (others would wait longer). */
  #leaveQueues(target: LockTarget): void {
    for (const l of this.#links) {
      for (let i = 1; i < target.releaseKeys.length; i += 2) {
        const key = target.releaseKeys[i]!
        l.port.send('zrem', [key, this.#waiterId], { key }).catch(() => {})
      }
    }
  }

  /**
   * Exponential backoff (retryDelayMs × 2^(attempt−1), at most ×32) plus uniform jitter. Waiting
   * callers are normally woken by a release naming them, so polling only has to cover lost
   * notifications and crashed holders; backing off keeps many waiters from polling in a storm.
   */
  #retryDelay(opts: ResolvedAcquireOptions, deadline: number, attempt: number): number {
    const d = opts.retryDelayMs * 2 ** Math.min(attempt - 1, 5) + Math.random() * opts.retryJitterMs
    return Math.max(0, Math.min(d, deadline - performance.now()))
  }

  #failure(target: LockTarget, r: AttemptResult, attempts: number, durationMs: number): Error {
    const err =
      r.kind === 'outage' || r.kind === 'expired'
        ? new LockUnavailableError(target.resources, r.votes)
        : new LockNotAcquiredError(target.resources, attempts, r.votes)
    publishEvent(FAILED_CHANNEL, {
      resources: target.resources,
      code: err.code,
      attempts,
      durationMs,
      votes: r.votes,
    })
    return err
  }

  async #handOver(q: LocalQueue, lock: Lock, next: LocalWaiter): Promise<void> {
    const yieldToOthers = q.handoffs >= this.options.maxLocalHandoffs
    let r: AttemptResult
    q.attemptStarted()
    try {
      r = await attemptAcquire(this.nodes, {
        target: lock.target,
        ttlMs: next.ttlMs,
        driftMs: next.driftMs,
        prev: lock.token,
        yieldToOthers,
      })
    } catch (err) {
      q.attemptEnded({ outage: true, votes: [] })
      q.handOverFailed(next)
      throw err
    }
    q.attemptEnded({ outage: r.kind === 'outage' || r.kind === 'expired', votes: r.votes })
    // Lost only if enough nodes proved prev absent that it cannot have been on a quorum; nodes
    // that had not answered when the hand-over was decided are not counted either way.
    const releasedOk = !provenGone(r.prevMissingOn, this.nodes.links.length, this.quorum)
    lock.markEnded(releasedOk ? 'released' : 'lost')
    if (r.kind === 'granted') {
      const handed = new Lock(this, lock.target, r.token, r.fence, next.ttlMs, r.validUntil)
      publishEvent(ACQUIRED_CHANNEL, {
        resources: lock.resources,
        fence: r.fence,
        attempts: 1,
        handedOver: true,
      })
      q.handedOver(next, handed, false)
    } else {
      q.handedOver(next, undefined, r.kind === 'yielded' || r.kind === 'held')
    }
    publishEvent(RELEASED_CHANNEL, {
      resources: lock.resources,
      fence: lock.fence,
      ok: releasedOk,
      votes: r.votes,
    })
    if (!releasedOk) {
      publishEvent(LOST_CHANNEL, { resources: lock.resources, fence: lock.fence, reason: 'release' })
      throw new LockLostError(lock.resources, 'it had expired or was taken over before release', r.votes)
    }
  }
}
