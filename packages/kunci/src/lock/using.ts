import { LockLostError, MaxHoldExceededError } from '../errors.js'
import { LOST_CHANNEL, publishEvent } from './events.js'
import type { Lock } from './lock.js'
import {
  type AcquireOptions,
  resolveAcquireOptions,
  resolveUsingLimits,
  type UsingOptions,
} from './lock-options.js'

interface Acquirer {
  acquire(resources: string | readonly string[], options?: AcquireOptions): Promise<Lock>
}

/**
 * Holds a lock for the duration of `fn`: extends it `extendBeforeMs` before it would expire,
 * aborts `fn`'s signal when it is lost, its validity ends unextended, or `maxHoldMs` is reached,
 * and always clears its timers and releases. `fn`'s result or error wins over a release error.
 */
export async function runUsing<T>(
  manager: Acquirer,
  managerOptions: Parameters<typeof resolveAcquireOptions>[1],
  resources: string | readonly string[],
  options: UsingOptions,
  fn: (signal: AbortSignal, lock: Lock) => Promise<T>,
  nodeTimeoutMs: number,
): Promise<T> {
  const ttlMs = resolveAcquireOptions(options, managerOptions).ttlMs
  const { extendBeforeMs, maxHoldMs } = resolveUsingLimits(options, ttlMs)
  const lock = await manager.acquire(resources, options)
  const controller = new AbortController()
  const holdEnd = performance.now() + maxHoldMs
  let extendTimer: NodeJS.Timeout | undefined
  let expiryTimer: NodeJS.Timeout | undefined
  let done = false

  const abort = (reason: Error) => {
    if (done || controller.signal.aborted) return
    clearTimeout(extendTimer)
    clearTimeout(expiryTimer)
    publishEvent(LOST_CHANNEL, { resources: lock.resources, fence: lock.fence, reason: reason.message })
    controller.abort(reason)
  }
  const armExpiry = () => {
    clearTimeout(expiryTimer)
    expiryTimer = setTimeout(
      () => abort(new LockLostError(lock.resources, 'its validity ended before it could be extended')),
      lock.validityMs,
    )
  }
  const armExtend = () => {
    const now = performance.now()
    if (now + lock.ttlMs > holdEnd) {
      // Another extension would hold past maxHoldMs: let the lock run out and stop there.
      clearTimeout(expiryTimer)
      expiryTimer = setTimeout(
        () => abort(new MaxHoldExceededError(lock.resources, maxHoldMs)),
        Math.min(lock.validityMs, Math.max(0, holdEnd - now)),
      )
      return
    }
    extendTimer = setTimeout(extend, Math.max(0, lock.validityMs - extendBeforeMs))
  }
  const extend = async () => {
    try {
      await lock.extend()
      if (done) return
      armExpiry()
      armExtend()
    } catch (err) {
      if (done) return
      if (err instanceof LockLostError) abort(err)
      // Unreachable nodes: the lock stays valid until the expiry timer; keep trying until then.
      else if (lock.validityMs > 0)
        extendTimer = setTimeout(extend, Math.min(nodeTimeoutMs, lock.validityMs / 4))
    }
  }

  armExpiry()
  armExtend()
  try {
    return await fn(controller.signal, lock)
  } finally {
    done = true
    clearTimeout(extendTimer)
    clearTimeout(expiryTimer)
    try {
      await lock.release()
    } catch (err) {
      publishEvent(LOST_CHANNEL, {
        resources: lock.resources,
        fence: lock.fence,
        reason: 'release',
        error: err,
      })
    }
  }
}
