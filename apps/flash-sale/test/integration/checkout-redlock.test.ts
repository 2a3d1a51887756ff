import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { countBy, crowd, runCheckouts } from '../support/checkouts.js'
import { saleFacts, violations } from '../support/invariants.js'
import { getWallet, moneyFacts, putWallet } from '../support/money.js'
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

  it("the source articles' case: a balance for one unit, two sales bought at once on both instances → one 200, one 402 INSUFFICIENT_FUNDS, balance 0; a keyed repeat answers the same 402", {
    timeout: 120_000,
  }, async () => {
    await fx.stack.putSale({ productId: '9931', stock: 50 })
    await fx.stack.putSale({ productId: '9932', stock: 50 })
    const users = Array.from({ length: 20 }, (_, i) => 60_000 + i)
    for (const u of users) await putWallet(fx.stack, u, 49.99)
    const [a, b] = await Promise.all(
      ['9931', '9932'].map((p) =>
        runCheckouts({
          url: fx.stack.url,
          productId: p,
          calls: users.map((userId) => ({ userId, idempotencyKey: `k-${p}-${userId}` })),
          concurrency: 20,
        }),
      ),
    )
    for (const [i, u] of users.entries()) {
      const pair = [a![i]!, b![i]!]
      expect(pair.map((o) => o.status).sort(), `user ${u}`).toEqual([200, 402])
      expect(pair.find((o) => o.status === 402)?.body.error?.code).toBe('INSUFFICIENT_FUNDS')
      expect(await getWallet(fx.stack, u)).toEqual({
        user_id: String(u),
        balance: 0,
        charged: 49.99,
        charges: 1,
      })
    }
    expect(await moneyFacts(fx.stack.databaseUrl, users.map(String))).toEqual({
      payments: 20,
      charged_twice: 0,
      negative: 0,
      drifting: 0,
    })
    // Nothing was taken for the refused ones: each sale sold exactly its 200s.
    for (const [p, outcomes] of [
      ['9931', a!],
      ['9932', b!],
    ] as const) {
      const facts = await saleFacts(fx.stack.databaseUrl, p)
      expect(facts.confirmed).toHaveLength(outcomes.filter((o) => o.status === 200).length)
    }
    // The refusal is the key's answer: repeated, it is the same 402 (not a second attempt).
    const u = users[0]!
    const p = a![0]!.status === 402 ? '9931' : '9932'
    await putWallet(fx.stack, u, 100)
    const [again] = await runCheckouts({
      url: fx.stack.url,
      productId: p,
      calls: [{ userId: u, idempotencyKey: `k-${p}-${u}` }],
    })
    expect(again).toMatchObject({ status: 402, body: { error: { code: 'INSUFFICIENT_FUNDS' } } })
  })
})
