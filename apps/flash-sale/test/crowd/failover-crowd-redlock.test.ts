import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
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
/** The window before the kill whose sales per second are the baseline. */
const BASELINE_MS = 2_000

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
    let sales = 0
    const crowd = runRetryingCrowd({
      url: stack.url,
      productId,
      clients: 200,
      stop: stop.signal,
      onRequest: (r) => {
        if (r.status === 200) sales++
      },
    })
    // The baseline: the rate of sales this machine gives the lock path, measured once sales flow
    // (the crowd's first seconds, 200 clients arriving at once on a busy machine, can sell nothing:
    // 0.0/s beside a CPU-bound process, issue 22), over BASELINE_MS before the kill.
    await eventually(
      async () => sales,
      (n) => n >= 20,
      { timeoutMs: 60_000, intervalMs: 50, what: '20 sales through the lock before the kill' },
    )
    const startedAt = Date.now()
    await sleep(BASELINE_MS)
    const killAt = Date.now()
    await stack.lockNodes!.nodes[2]!.kill()
    // Long enough for the crowd to meet the dead node on every acquire, and for the sale to end.
    await sleep(8_000)
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
    // refuses connections at once, so the lock path keeps its pace. Compared with the rate before
    // the kill rather than with a count: the count follows the machine (a fixed "more than 100
    // in 8 s" failed with 63 while other test runs shared the two cores, before and after alike).
    const salesPerS = (from: number, to: number) =>
      requests.filter((r) => r.status === 200 && r.sentAt >= from && r.sentAt < to).length /
      ((to - from) / 1_000)
    // Until the sell-out, if it came: after it, checkouts are 409s and sales stop for that reason.
    const soldOutAt = Math.min(...requests.filter((r) => r.code === 'SOLD_OUT').map((r) => r.sentAt))
    const before = salesPerS(startedAt, killAt)
    const afterKill = salesPerS(killAt, Math.min(killAt + 6_000, soldOutAt))
    const rates = `${seen}; sales/s before the kill ${before.toFixed(1)}, after ${afterKill.toFixed(1)}`
    console.log(`[failover-crowd-redlock] ${rates}`)
    expect(before, rates).toBeGreaterThan(0)
    expect(afterKill, rates).toBeGreaterThan(before * 0.3)
    expect(Math.max(...requests.map((r) => r.serverMs ?? 0))).toBeLessThan(REDLOCK_BOUND_MS)
    const sold = finals.filter((f) => f.status === 200)
    expect(sold.length).toBeLessThanOrEqual(STOCK)
    const facts = await waitForSettled(stack.databaseUrl, productId, sold.length)
    expect(violations(finals, facts, STOCK)).toEqual([])
  })
})
