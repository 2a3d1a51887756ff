import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { CHECKOUT_DEADLINE_MS } from '../support/failover-checks.js'
import { violations, waitForSettled } from '../support/invariants.js'
import { runRetryingCrowd } from '../support/retrying-crowd.js'
import { useStack } from '../support/stack-fixture.js'

// Issue 13 for the redlock strategy: a lock node killed with kill -9 (left dead) under the same
// retrying crowd. Four of five nodes still form a quorum, so checkouts must keep being answered
// (200, 409, or 429 while the product lock is contended), none past its deadline, none hanging.
describe('redlock: kill -9 of a lock node under a retrying crowd', () => {
  const fx = useStack({ strategy: 'redlock', instances: 2 }, { db: 'fs_crowd_redlock' })

  it('checkouts keep being answered 200/409/429, no 5xx, no hang', { timeout: 180_000 }, async () => {
    const { stack } = fx
    const productId = '7401'
    await stack.putSale({ productId, stock: 100 })
    const stop = new AbortController()
    const crowd = runRetryingCrowd({
      url: stack.url,
      productId,
      clients: 200,
      users: 4_000,
      stop: stop.signal,
    })
    await sleep(500)
    const killAt = Date.now()
    await stack.lockNodes!.nodes[2]!.kill()
    // Long enough for the crowd to meet the dead node on every acquire, and for the sale to end.
    await sleep(8_000)
    stop.abort()
    const { requests, finals } = await crowd
    const statuses: Record<string, number> = {}
    for (const r of requests) statuses[r.status] = (statuses[r.status] ?? 0) + 1
    expect(
      Object.keys(statuses).filter((s) => !['200', '409', '429'].includes(s)),
      JSON.stringify(statuses),
    ).toEqual([])
    const after = requests.filter((r) => r.sentAt >= killAt)
    expect(after.filter((r) => r.status === 200 || r.status === 409).length).toBeGreaterThan(100)
    // The lock wait (250 ms) plus node timeouts bound every answer; the deadline is generous.
    expect(Math.max(...requests.map((r) => r.ms))).toBeLessThan(CHECKOUT_DEADLINE_MS)
    const sold = finals.filter((f) => f.status === 200)
    expect(sold.length).toBeLessThanOrEqual(100)
    const facts = await waitForSettled(stack.databaseUrl, productId, sold.length)
    expect(violations(finals, facts, 100)).toEqual([])
  })
})
