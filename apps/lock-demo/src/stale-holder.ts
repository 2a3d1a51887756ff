import { setTimeout as sleep } from 'node:timers/promises'
import { KunciError } from 'kunci'
import type { History } from './history.js'
import type { Pod } from './pods.js'
import type { AccountStore } from './store.js'
import { RESOURCE } from './workers.js'

export interface StaleHolderOutcome {
  readonly fence: number
  /** The store refused the write made after the lock had expired. */
  readonly writeRejected: boolean
  /** Code of the error release() reported, if any (E_LOCK_LOST expected). */
  readonly releaseCode: string | undefined
}

/**
 * A holder that stops for longer than its TTL (a long GC pause, a SIGSTOP, a swapped-out VM)
 * and then carries on as if it still held the lock. Other workers take the lock meanwhile; the
 * store's fence check is what turns its late write away.
 */
export async function staleHolder(opts: {
  pod: Pod
  store: AccountStore
  history: History
  pauseMs: number
  log: (line: string) => void
}): Promise<StaleHolderOutcome | undefined> {
  const { pod, store, history, pauseMs, log } = opts
  let lock: Awaited<ReturnType<Pod['redlock']['acquire']>>
  try {
    lock = await pod.redlock.acquire(RESOURCE, { ttlMs: 300, retryCount: 100, retryDelayMs: 20 })
  } catch (err) {
    if (err instanceof KunciError) {
      log(`stale holder: could not get the lock (${err.code}); skipped`)
      return undefined
    }
    throw err
  }
  const start = performance.now()
  const validEnd = start + lock.validityMs
  const balance = await store.readBalance()
  log(`stale holder: got fence ${lock.fence}, read balance ${balance}, now "pauses" for ${pauseMs} ms`)
  await sleep(pauseMs)
  // Only the part of the hold that was valid counts for the overlap check.
  history.add({
    worker: 'stale-holder',
    fence: lock.fence,
    start,
    end: Math.min(validEnd, performance.now()),
  })
  const r = await store.fencedWrite(balance + 1, lock.fence)
  log(
    r.applied
      ? 'stale holder: its late write was applied (nobody wrote in between)'
      : `stale holder: late write REJECTED by the store (fence ${lock.fence} < ${r.storedFence})`,
  )
  let releaseCode: string | undefined
  try {
    await lock.release()
  } catch (err) {
    if (!(err instanceof KunciError)) throw err
    releaseCode = err.code
  }
  log(`stale holder: release() → ${releaseCode ?? 'ok'}`)
  return { fence: lock.fence, writeRejected: !r.applied, releaseCode }
}
