import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { countBy, crowd, runCheckouts } from '../support/checkouts.js'
import { saleFacts } from '../support/invariants.js'
import { type LocalStack, startStack } from '../support/stack-fixture.js'

// The old design, kept to show why the others exist. This stack runs on the embedded SQL (PGlite
// behind its socket server, shared by 2 service processes and the worker), the default of `up`.
describe('naive strategy (read, then write the stock), on the embedded SQL', () => {
  let stack: LocalStack

  beforeAll(async () => {
    stack = await startStack({
      strategy: 'naive',
      instances: 2,
      port: 0,
      lockNodes: false,
      env: { MAX_EVENT_LOOP_DELAY_MS: '2000' },
    })
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
  }, 60_000)

  it('oversells under the load the other strategies survive; the SQL guard still keeps the books at the stock', async () => {
    await stack.putSale({ productId: '9921', stock: 100 })
    const outcomes = await runCheckouts({
      url: stack.url,
      productId: 9921,
      calls: crowd(3_000, 2_000),
      concurrency: 128,
    })
    const answered200 = countBy(outcomes, (o) => o.status)[200] ?? 0
    expect(answered200).toBeGreaterThan(100) // users were told they bought units that do not exist
    // The worker's second guard (sold < stock_total in SQL) refuses the surplus: at most 100 persist.
    const deadline = Date.now() + 60_000
    let facts = await saleFacts(stack.databaseUrl, '9921')
    while (facts.confirmed.length + facts.failed < answered200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200))
      facts = await saleFacts(stack.databaseUrl, '9921')
    }
    expect(facts.confirmed.length).toBeLessThanOrEqual(100)
    expect(facts.confirmed.length + facts.failed).toBe(answered200)
  })
})
