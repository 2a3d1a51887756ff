import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { countBy, crowd, runCheckouts } from '../support/checkouts.js'
import { saleFacts, violations } from '../support/invariants.js'
import { useStack } from '../support/stack-fixture.js'

// The source articles' first remedy: Redlock over 5 independent nodes around an SQL transaction
// fenced by the lock's token. Real nodes, real PostgreSQL behind a fault proxy, 2 service processes.
describe('redlock strategy: no oversell, no double charge, also with a lock node paused and SQL down', () => {
  const fx = useStack({ strategy: 'redlock', instances: 2 }, { db: 'fs_redlock', sqlProxy: true })

  it('5,000 checkouts from 3,000 users for 100 units: exactly 100 × 200 (confirmed), the rest 409', {
    timeout: 240_000,
  }, async () => {
    await fx.stack.putSale({ productId: '9921', stock: 100 })
    // Contended checkouts answer 429 BUSY; the clients retry them, as real ones would.
    const outcomes = await runCheckouts({
      url: fx.stack.url,
      productId: 9921,
      calls: crowd(5_000, 3_000),
      concurrency: 128,
    })
    expect(countBy(outcomes, (o) => o.status)).toEqual({ 200: 100, 409: 4_900 })
    for (const o of outcomes.filter((x) => x.status === 200)) expect(o.body.status).toBe('confirmed')
    const facts = await saleFacts(fx.stack.databaseUrl, '9921')
    expect(facts.confirmed).toHaveLength(100)
    expect(violations(outcomes, facts, 100)).toEqual([])
  })

  it('a lock node SIGSTOPped during load: still exactly the stock, nothing twice', async () => {
    await fx.stack.putSale({ productId: '9926', stock: 150 })
    const node = fx.stack.lockNodes!.nodes[0]!
    const load = runCheckouts({
      url: fx.stack.url,
      productId: 9926,
      calls: crowd(1_000, 600, 40_000),
      concurrency: 64,
    })
    await sleep(100)
    node.pause()
    await sleep(1_500)
    node.resume()
    const outcomes = await load
    expect(countBy(outcomes, (o) => o.status)).toEqual({ 200: 150, 409: 850 })
    const facts = await saleFacts(fx.stack.databaseUrl, '9926')
    expect(violations(outcomes, facts, 150)).toEqual([])
  })

  it('SQL down: 503 with Retry-After, nothing half-written; once SQL is back the sale completes', async () => {
    await fx.stack.putSale({ productId: '9927', stock: 20 })
    fx.sqlProxy.refuse(true)
    fx.sqlProxy.dropConnections()
    const down = await runCheckouts({
      url: fx.stack.url,
      productId: 9927,
      calls: crowd(20, 20, 50_000),
      concurrency: 8,
      deadlineMs: 0, // no retries: record what a client sees while SQL is down
    })
    expect(new Set(down.map((o) => o.status))).toEqual(new Set([503]))
    for (const o of down) expect(o.body.error?.code).toBe('UNAVAILABLE')
    fx.sqlProxy.refuse(false)
    const outcomes = await runCheckouts({
      url: fx.stack.url,
      productId: 9927,
      calls: crowd(60, 40, 50_000),
      concurrency: 8,
    })
    expect(countBy(outcomes, (o) => o.status)[200]).toBe(20)
    const facts = await saleFacts(fx.stack.databaseUrl, '9927')
    expect(violations(outcomes, facts, 20)).toEqual([])
  })
})
