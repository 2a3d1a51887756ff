import { keySlot } from 'kunci'
import { describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
import { CHECKOUT_DEADLINE_MS, unreachableSeconds } from '../support/failover-checks.js'
import { useStack } from '../support/stack-fixture.js'

// /readyz and flash_sale_sale_store_unreachable_seconds follow a sale's slot (issue 13): the
// slot's master and its replica are frozen with SIGSTOP, so the slot stays unreachable for as
// long as the test says (no failover can end it early); then both go on (SIGCONT).
describe('readiness follows the sale slot', () => {
  const fx = useStack({ strategy: 'lua', instances: 2, lockNodes: false }, { db: 'fs_readiness' })

  it('readyz false and the gauge rising while the slot is unreachable; both back after; checkouts 503 within the deadline', {
    timeout: 120_000,
  }, async () => {
    const { stack } = fx
    const productId = '7501'
    await stack.putSale({ productId, stock: 10 })
    const readyz = async () => {
      const r = await fetch(`${stack.url}/readyz`)
      return { status: r.status, body: (await r.json()) as { reason?: string } }
    }
    const gauge = async () =>
      unreachableSeconds({ body: await fetch(stack.metricsUrl!).then((r) => r.text()) }, productId)
    await eventually(readyz, (r) => r.status === 200, { what: 'ready before the fault' })
    await eventually(gauge, (v) => v === 0, { what: 'the gauge at 0 before the fault' })

    const master = await stack.cluster.slotOwner(keySlot(`{sale:${productId}}:stock`))
    const replica = await stack.cluster.replicaOf(master)
    master.pause()
    replica!.pause()
    const pausedAt = Date.now()
    try {
      const down = await eventually(readyz, (r) => r.status === 503, {
        timeoutMs: 10_000,
        intervalMs: 100,
        what: 'readyz false',
      })
      // "a sale's Redis slot is unreachable" (or, on an instance that has not yet seen the sale in
      // the registry, "Redis is unreachable": its ping may meet a frozen node too)
      expect(down.body.reason).toMatch(/unreachable/)
      // Seen within a probe interval and a probe timeout (1 s each) and the 1 s readiness cache.
      expect(Date.now() - pausedAt).toBeLessThan(3_000 + 2_000)
      await eventually(gauge, (v) => (v ?? 0) >= 1, { timeoutMs: 10_000, what: 'the gauge above 1 s' })
      // A checkout meanwhile: 503 with Retry-After, within the store's deadline.
      const res = await fetch(`${stack.url}/v1/checkout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ product_id: Number(productId), user_id: 1 }),
      })
      expect(res.status).toBe(503)
      expect(res.headers.get('retry-after')).toBe('1')
      const held = Number(/app;dur=([\d.]+)/.exec(res.headers.get('server-timing') ?? '')?.[1])
      expect(held).toBeGreaterThan(1_500)
      expect(held).toBeLessThan(CHECKOUT_DEADLINE_MS)
    } finally {
      master.resume()
      replica!.resume()
    }
    const resumedAt = Date.now()
    await eventually(readyz, (r) => r.status === 200, { timeoutMs: 20_000, what: 'readyz true again' })
    await eventually(gauge, (v) => v === 0, { timeoutMs: 10_000, what: 'the gauge back at 0' })
    console.log(`[readiness] ready again ${Date.now() - resumedAt} ms after SIGCONT`)
  })
})
