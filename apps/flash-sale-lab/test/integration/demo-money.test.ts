import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type DemoResult, runDemo } from '../../src/demo/run-demo.js'
import { formatSummary } from '../../src/demo/summary-table.js'
import { PG_ADMIN_URL } from '../support/pg.js'

// Only the demo's money phases (`demo --phases money`), quick profile, lua, on a real stack
// (3+3 Redis Cluster, 2 service processes, a worker killed with kill -9 in each phase, PostgreSQL).
describe('flash-sale-lab demo --phases money (lua, quick)', () => {
  let dir: string
  let result: DemoResult

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'flash-demo-money-'))
    result = await runDemo({
      profile: 'quick',
      strategies: ['lua'],
      phases: ['money'],
      sql: 'postgres',
      postgresAdminUrl: PG_ADMIN_URL,
      reportDir: join(dir, 'report'),
      drainTimeoutMs: 30_000,
      echo: process.env.FS_ECHO === '1',
    })
  }, 90_000)

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const phase = (id: string) => {
    const p = result.input.strategies[0]!.phases.find((x) => x.id === id)
    expect(p, id).toBeDefined()
    return p!
  }

  it('runs only the two money phases, each with its worker kill applied and undone, and passes', () => {
    const lua = result.input.strategies[0]!
    expect(lua.phases.map((p) => p.id)).toEqual(['money-instant', 'money-hold'])
    expect(lua.moneySkipped).toBeUndefined()
    for (const p of lua.phases) {
      expect(p.faults.map((f) => f.fault)).toEqual(['kill-worker'])
      expect(p.faults[0]!.error).toBeUndefined()
      expect(p.summary.verdict, `${p.id}: ${(p.summary.notes ?? []).join('; ')}`).toBe('pass')
    }
    expect(result.ok).toBe(true)
  })

  it('instant: short wallets fail INSUFFICIENT_FUNDS, their units come back once and sell again; nobody below 0', () => {
    const m = phase('money-instant').money!
    expect(m.payment).toBe('instant')
    expect(m.failedFunds).toBeGreaterThan(0)
    expect(m.returned).toBe(m.failedFunds)
    expect(m.reserved).toBe(m.sold + m.returned)
    // More units were reserved than exist: the returned ones were bought again.
    expect(m.reserved).toBeGreaterThan(m.stock)
    expect(m.paid).toBe(m.sold)
    expect(m.stock).toBe(m.sold + m.remaining!)
    expect(m.balances.min).toBeGreaterThanOrEqual(0)
    // 90 users funded 49.99 (60) or 49.98 (30); each paid order took 49.99.
    expect(m.balances.sum).toBeCloseTo(60 * 49.99 + 30 * 49.98 - m.paid * 49.99, 2)
  })

  it('hold: paid, cancelled and expired orders; every held order ended, each returned unit once', () => {
    const m = phase('money-hold').money!
    expect(m).toMatchObject({ payment: 'hold', holdSeconds: 3, held: 0, pendingReturns: 0 })
    expect(m.paid).toBeGreaterThan(0)
    expect(m.cancelled).toBeGreaterThan(0)
    expect(m.expired).toBeGreaterThan(0)
    expect(m.returned).toBe(m.cancelled + m.expired + m.failedFunds)
    expect(m.stock).toBe(m.sold + m.remaining!)
    expect(m.balances.min).toBeGreaterThanOrEqual(0)
    // What the users did: each was answered (200 paid, 402 for a short wallet, 200 cancelled, or
    // ORDER_NOT_PAYABLE if it came after pay_by), none still pending; the unpaid ones expired.
    expect(m.payments.paid).toBe(m.paid)
    expect(m.payments.cancelled).toBe(m.cancelled)
    expect(m.expired).toBeGreaterThanOrEqual((m.payments.left ?? 0) + (m.payments.insufficient_funds ?? 0))
    expect(m.payments.gave_up ?? 0).toBe(0)
    expect(m.payments.error ?? 0).toBe(0)
  })

  it('shows the books in the console table and the report', () => {
    const text = formatSummary(result.input)
    expect(text).toMatch(/money: the books of each sale once drained/)
    expect(text).toMatch(
      /stock = sold \+ remaining \+ pending\s+\d+ = \d+ \+ \d+ \+ 0 ✓\s+\d+ = \d+ \+ \d+ \+ 0 ✓/,
    )
    const html = readFileSync(result.reportFile, 'utf8')
    expect(html).toContain('Money and the life of an order')
    expect(html).toContain('data-phase="lua-money-hold"')
  })
})
