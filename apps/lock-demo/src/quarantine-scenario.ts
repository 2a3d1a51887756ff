import { type FaultProxy, type RedisNode, startProxy } from '@kunci/topology'
import { KunciError, type Lock, LockNotAcquiredError, type NodeVote } from 'kunci'
import { createPod, type Pod, whenReady } from './pods.js'
import type { AccountStore } from './store.js'

const RESOURCE = 'account:quarantine'

export interface QuarantineOutcome {
  /** A pod with quarantine on was refused while a restarted-empty node still "forgot" A's lock. */
  readonly safePodRefused: boolean
  /** A pod with quarantine off was granted the same lock while A still held it. */
  readonly unsafeDoubleGrant: boolean
  /** After the double grant, the store refused A's stale write (C had written with a higher fence). */
  readonly staleWriteRejected: boolean | undefined
  readonly violations: string[]
}

function votes(list: readonly NodeVote[]): string {
  return list.map((v) => `node-${v.node} ${v.status}`).join(', ')
}

/**
 * Why a node that restarted empty must sit out: pod A holds a lock on nodes 0-2 only (it is cut
 * off from 3 and 4), node-2 restarts empty and forgets it, and nodes 2, 3, 4 now form a majority
 * that would grant the lock again. A pod with the quarantine refuses to count node-2; a pod
 * without it gets the lock while A still holds it, and only the fencing token saves the data.
 */
export async function quarantineScenario(opts: {
  nodes: readonly RedisNode[]
  /** A pod that was connected before the restart, with the default quarantine. */
  safePod: Pod
  store: AccountStore
  log: (line: string) => void
}): Promise<QuarantineOutcome> {
  const { nodes, safePod, store, log } = opts
  const violations: string[] = []
  let safePodRefused = false
  let unsafeDoubleGrant = false
  let staleWriteRejected: boolean | undefined
  const proxies: FaultProxy[] = []
  let podA: Pod | undefined
  let podC: Pod | undefined
  let lockA: Lock | undefined
  let lockC: Lock | undefined
  try {
    await store.reset(0)
    // Pod A's own network path to node-3 and node-4, refusing every connection: a partition
    // between A and those two nodes only.
    const cut = new Map<number, number>()
    for (const i of [3, 4]) {
      const p = await startProxy({ host: nodes[i]!.host, port: nodes[i]!.serverPort })
      p.refuse(true)
      proxies.push(p)
      cut.set(i, p.port)
    }
    // No offline queue: a command to an unreachable node fails now instead of being sent when it
    // comes back (which would plant A's key there later and spoil the experiment).
    podA = createPod('pod-A', nodes, { portOverride: cut, client: { enableOfflineQueue: false } })
    await whenReady(podA.clients.slice(0, 3))
    lockA = await podA.redlock.acquire(RESOURCE, { ttlMs: 2_000, retryCount: 30 })
    log(
      `pod A (cut off from node-3, node-4) holds "${RESOURCE}" on node-0..2, fence ${lockA.fence}, ` +
        `valid ${Math.round(lockA.validityMs)} ms`,
    )

    await nodes[2]!.kill()
    await nodes[2]!.restart({ empty: true })
    log('node-2 killed and restarted EMPTY: it no longer knows about A')

    try {
      const lock = await safePod.redlock.acquire(RESOURCE, { retryCount: 0 })
      await lock.release().catch(() => {})
      violations.push('a pod with quarantine on was granted a lock that pod A still held')
      log('!! pod B (quarantine on) was GRANTED the lock: the quarantine failed')
    } catch (err) {
      if (!(err instanceof KunciError)) throw err
      safePodRefused = true
      const detail = err instanceof LockNotAcquiredError ? `: ${votes(err.votes)}` : ''
      log(`pod B (quarantine on, the default) refused with ${err.code}${detail}`)
    }

    podC = createPod('pod-C', nodes, { lock: { quarantine: false } })
    await whenReady(podC.clients)
    try {
      lockC = await podC.redlock.acquire(RESOURCE, { retryCount: 0 })
      unsafeDoubleGrant = lockA.validityMs > 0
      log(
        `pod C (quarantine: false) GRANTED, fence ${lockC.fence}, while A's lock is still valid for ` +
          `${Math.round(lockA.validityMs)} ms: two holders at once (node-2, node-3, node-4 voted for C)`,
      )
    } catch (err) {
      if (!(err instanceof KunciError)) throw err
      log(`pod C (quarantine: false) refused with ${err.code}; the unsafe case did not occur this time`)
    }

    if (lockC && unsafeDoubleGrant) {
      // Both "holders" read the balance, C writes first, then A writes what it computed.
      const balanceA = await store.readBalance()
      const balanceC = await store.readBalance()
      await store.fencedWrite(balanceC + 1, lockC.fence)
      const r = await store.fencedWrite(balanceA + 1, lockA.fence)
      staleWriteRejected = !r.applied
      if (r.applied) violations.push("pod A's write with a lower fence was applied after pod C's")
      log(
        r.applied
          ? "!! pod A's stale write was APPLIED over pod C's"
          : `the store refused A's write: fence ${lockA.fence} < ${r.storedFence} (C's). Fencing kept the data right`,
      )
    }

    if (lockC) await lockC.release()
    try {
      await lockA.release()
      log("pod A's release succeeded")
    } catch (err) {
      if (!(err instanceof KunciError)) throw err
      log(`pod A's release reports ${err.code}: node-2 lost its copy, so A no longer holds a majority`)
    }
    lockA = lockC = undefined
  } finally {
    await lockA?.release().catch(() => {})
    await lockC?.release().catch(() => {})
    await podA?.close()
    await podC?.close()
    await Promise.all(proxies.map((p) => p.close()))
  }
  return { safePodRefused, unsafeDoubleGrant, staleWriteRejected, violations }
}
