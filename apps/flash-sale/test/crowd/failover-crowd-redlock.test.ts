import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
import { maxOf } from '../support/failover-checks.js'
import { violations, waitForSettled } from '../support/invariants.js'
import { runRetryingCrowd } from '../support/retrying-crowd.js'
import { useStack } from '../support/stack-fixture.js'

// Issue 13 for the redlock strategy: a lock node killed with kill -9 (left dead) under the same
// retrying crowd. Four of five nodes still form a quorum, so checkouts must keep being answered
// (200, 409, or 429 while the product lock is contended), none hanging. A checkout is bounded by
// its parts (strategies/redlock.ts): up to three waits for an SQL connection (2 s each), the lock
// (250 ms) and short statements. A 503 is allowed only as the rare answer of a machine too loaded
// to answer in time (an SQL connection or a quorum vote past its timeout), not as what the kill
// causes.
const REDLOCK_BOUND_MS = 3 * 2_000 + 250 + 1_750
const STOCK = 2_000
/** Sales that show the lock path is selling before the baseline starts. */
const WARM_UP_SALES = 5
/**
 * Sales timed before the kill (the baseline) and after it. 30, not 10: on a quiet machine 10
 * sales took 103 ms, and the fixed cost of the moment of the kill (the requests in flight that
 * met the node as it died) then weighed 4× the baseline (415 ms after it, once, alone).
 */
const SALES = 30
/** After the kill the crowd sells at least at this share of its pace before. */
const MIN_PACE_AFTER = 0.3

describe('redlock: kill -9 of a lock node under a retrying crowd', () => {
  const fx = useStack({ strategy: 'redlock', instances: 2 }, { db: 'fs_crowd_redlock' })

  it('checkouts keep being answered 200/409/429, no hang', { timeout: 180_000 }, async () => {
    const { stack } = fx
    const productId = '7401'
    // Enough stock that the lock path (not only the sold-out answer from SQL) runs all along.
    await stack.putSale({ productId, stock: STOCK })
    // Lock nodes younger than maxTtlMs (5 s) sit out in restart quarantine (docs/locks.md): the
    // stack's were started moments ago. Wait until a checkout gets through the lock at all.
    await stack.putSale({ productId: '7400', stock: 1_000_000 })
    let warmUp = 0
    await eventually(
      () =>
        fetch(`${stack.url}/v1/checkout`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ product_id: 7400, user_id: ++warmUp }),
        }).then((r) => r.status),
      (status) => status === 200,
      { timeoutMs: 30_000, intervalMs: 250, what: 'a first sale through the lock quorum' },
    )
    const stop = new AbortController()
    /** When each sale's request was sent, in the order the 200s arrived. */
    const saleSentAt: number[] = []
    const crowd = runRetryingCrowd({
      url: stack.url,
      productId,
      clients: 200,
      stop: stop.signal,
      onRequest: (r) => {
        if (r.status === 200) saleSentAt.push(r.sentAt)
      },
    })
    const salesReach = (n: number, what: string) =>
      eventually(
        async () => saleSentAt.length,
        (k) => k >= n,
        { timeoutMs: 60_000, intervalMs: 20, what },
      )
    // The baseline is the pace this machine gives the lock path, in the same run: the time the
    // crowd takes for SALES sales once sales flow (a fixed window over the crowd's first seconds
    // sold nothing beside a CPU-bound process, 0.0/s, issue 22; and a count, unlike a window, has
    // the same noise at any pace).
    await salesReach(WARM_UP_SALES, 'sales through the lock to flow')
    const baselineFrom = Date.now()
    await salesReach(WARM_UP_SALES + SALES, `${SALES} sales for the baseline`)
    const beforeMs = Date.now() - baselineFrom
    await stack.lockNodes!.nodes[2]!.kill()
    // From the moment the node is gone (kill -9 and its exit waited for): SALES sales of requests
    // sent after it, each of which met the dead node.
    const killAt = Date.now()
    const afterKill = () => saleSentAt.filter((t) => t >= killAt).length
    const boundMs = beforeMs / MIN_PACE_AFTER
    await eventually(
      async () => afterKill(),
      (k) => k >= SALES,
      { timeoutMs: boundMs + 60_000, intervalMs: 20, what: `${SALES} sales after the kill` },
    )
    const afterMs = Date.now() - killAt
    // A few seconds with the node dead in every acquire, whatever the pace.
    await sleep(Math.max(0, killAt + 3_000 - Date.now()))
    stop.abort()
    const { requests, finals } = await crowd
    const statuses: Record<string, number> = {}
    for (const r of requests) statuses[r.status] = (statuses[r.status] ?? 0) + 1
    const why: Record<string, number> = {}
    for (const r of requests.filter((q) => q.status === 503))
      why[r.message ?? '?'] = (why[r.message ?? '?'] ?? 0) + 1
    const seen = `${JSON.stringify(statuses)} 503s: ${JSON.stringify(why)}`
    expect(
      Object.keys(statuses).filter((s) => !['200', '409', '429', '503'].includes(s)),
      seen,
    ).toEqual([])
    expect(statuses[503] ?? 0, seen).toBeLessThanOrEqual(requests.length * 0.02)
    // Sales go on through the lock after the kill: 4 of 5 nodes are a quorum, and a dead node
    // refuses connections at once, so the lock path keeps its pace: SALES sales after the kill
    // take at most 1 / MIN_PACE_AFTER times what SALES took before it. Compared with the pace
    // before the kill rather than with a count: the count follows the machine (a fixed "more than
    // 100 in 8 s" failed with 63 while other test runs shared the two cores, before and after alike).
    const pace = `${seen}; ${SALES} sales took ${beforeMs} ms before the kill, ${afterMs} ms after it`
    console.log(`[failover-crowd-redlock] ${pace}`)
    expect(afterMs, pace).toBeLessThanOrEqual(boundMs)
    expect(maxOf(requests.map((r) => r.serverMs ?? 0))).toBeLessThan(REDLOCK_BOUND_MS)
    const sold = finals.filter((f) => f.status === 200)
    expect(sold.length).toBeLessThanOrEqual(STOCK)
    const facts = await waitForSettled(stack.databaseUrl, productId, sold.length)
    expect(violations(finals, facts, STOCK)).toEqual([])
  })
})
