import { LockLostError } from '../errors.js'
import type { LockTarget } from './lock-target.js'

/** What a Lock needs from its manager; kept narrow so the handle stays a plain value object. */
export interface LockOwner {
  release(lock: Lock): Promise<void>
  extend(lock: Lock, ttlMs: number): Promise<void>
}

export type LockState = 'held' | 'released' | 'lost'

/**
 * A granted lock. `fence` increases strictly from one holder of a resource to the next: pass it
 * to the protected resource so that a holder that stalled past its validity is rejected there.
 *
 * `release()` and `[Symbol.asyncDispose]()` are idempotent. Release never deletes another
 * holder's key, and it throws `LockLostError` when the lock had already expired or been taken
 * over, so a lost lock is never silent.
 */
export class Lock implements AsyncDisposable {
  readonly resources: readonly string[]
  /** Random 128-bit holder token (hex). */
  readonly token: string
  /** Fencing token: strictly greater than the token of any earlier holder of these resources. */
  readonly fence: number
  /** The TTL the lock was acquired or last extended with, in ms. */
  ttlMs: number
  /** @internal */
  readonly target: LockTarget
  #owner: LockOwner
  #validUntil: number
  #state: LockState = 'held'
  #release: Promise<void> | undefined

  /** @internal */
  constructor(
    owner: LockOwner,
    target: LockTarget,
    token: string,
    fence: number,
    ttlMs: number,
    validUntil: number,
  ) {
    this.#owner = owner
    this.target = target
    this.resources = target.resources
    this.token = token
    this.fence = fence
    this.ttlMs = ttlMs
    this.#validUntil = validUntil
  }

  /** Milliseconds for which the lock is still guaranteed ours (ttl − elapsed − drift); 0 when expired. */
  get validityMs(): number {
    return Math.max(0, this.#validUntil - performance.now())
  }

  /** performance.now() timestamp at which validity ends. @internal */
  get validUntil(): number {
    return this.#validUntil
  }

  get state(): LockState {
    return this.#state
  }

  /** True while held and within its validity. */
  get isHeld(): boolean {
    return this.#state === 'held' && this.#validUntil > performance.now()
  }

  /** Resets the TTL on every node; throws `LockLostError` if the lock is no longer ours on a quorum. */
  extend(ttlMs: number = this.ttlMs): Promise<void> {
    if (this.#state !== 'held') {
      return Promise.reject(new LockLostError(this.resources, `it was already ${this.#state}`))
    }
    return this.#owner.extend(this, ttlMs)
  }

  release(): Promise<void> {
    this.#release ??= this.#state === 'held' ? this.#owner.release(this) : Promise.resolve()
    return this.#release
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release()
  }

  /** @internal */
  markExtended(validUntil: number, ttlMs: number): void {
    this.#validUntil = validUntil
    this.ttlMs = ttlMs
  }

  /** @internal */
  markEnded(state: 'released' | 'lost'): void {
    this.#state = state
  }
}
