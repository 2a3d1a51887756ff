import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkPhase, type SaleLedger } from '../../src/demo/checker.js'
import { type DemoResult, runDemo } from '../../src/demo/run-demo.js'
import type { LoadOrder } from '../../src/load/result.js'
import type { RoomComparison } from '../../src/report/report-input.js'
import { PG_ADMIN_URL } from '../support/pg.js'

const ledger = (confirmed: [string, string][], extra: Partial<SaleLedger> = {}): SaleLedger => ({
  round: 1,
  confirmed: new Map(confirmed),
  failed: 0,
  payments: confirmed.length,
  doubleCharges: 0,
  usersTwice: 0,
  walletMismatch: false,
  ...extra,
})
const order = (order_id: string, user_id: number, status = 200): LoadOrder => ({ order_id, user_id, status })

describe('the demo checker', () => {
  it('passes a clean sale and counts a double click once', () => {
    const check = checkPhase(
      { orders: [order('a', 1), order('a', 1), order('b', 2, 202)] },
      ledger([
        ['a', '1'],
        ['b', '2'],
      ]),
      2,
    )
    expect(check).toMatchObject({ sold: 2, oversold: 0, persisted: 2, lost: 0, violations: [] })
  })

  it('flags oversold, a lost 200, an order for another user, a user twice and a double charge', () => {
    const orders = [order('a', 1), order('b', 2), order('c', 3), order('d', 4)]
    const check = checkPhase(
      { orders },
      ledger(
        [
          ['a', '1'],
          ['b', '9'],
          ['c', '3'],
        ],
        { usersTwice: 1, doubleCharges: 1, payments: 4 },
      ),
      2,
    )
    expect(check.oversold).toBe(2)
    expect(check.lost).toBe(1)
    expect(check.violations).toHaveLength(6)
  })

  it('allows a 202 lost with a failover (documented) but not a lost 200', () => {
    const check = checkPhase({ orders: [order('a', 1), order('b', 2, 202)] }, ledger([['a', '1']]), 1)
    expect(check).toMatchObject({ unconfirmed202: 1, oversold: 0, violations: [] })
  })
})

// The demo's own scenario at --profile quick: every strategy on its own real stack (3+3 Redis
// Cluster, 5 lock nodes, PostgreSQL, 2 service processes, a worker), every fault. The money
// phases have their own file (demo-money.test.ts, `--phases money`): with them this one would
// not fit its time on a shared 2-core machine.
describe('flash-sale-lab demo, quick profile, every fault', () => {
  let dir: string
  let result: DemoResult

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'flash-demo-'))
    result = await runDemo({
      profile: 'quick',
      phases: ['sale', 'storm', 'crowd'],
      sql: 'postgres',
      postgresAdminUrl: PG_ADMIN_URL,
      reportDir: join(dir, 'report'),
      echo: process.env.FS_ECHO === '1',
    })
  }, 300_000)

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  const strategy = (name: string) => {
    const s = result.input.strategies.find((x) => x.strategy === name)
    expect(s, name).toBeDefined()
    return s!
  }

  it('injects the four faults in the first two phases and the master kill in the retry storm, each applied and undone; the crowd phases have none', () => {
    expect(result.input.strategies.map((s) => s.strategy)).toEqual(['naive', 'redlock', 'lua'])
    for (const s of result.input.strategies) {
      const crowds = s.strategy === 'redlock' ? [] : ['crowd-direct', 'crowd-room']
      // --phases sale,storm,crowd: the money phases are not run here.
      expect(s.phases.map((p) => p.id)).toEqual(['sale-100', 'sale-1000', 'storm-100', ...crowds])
      for (const p of s.phases) {
        expect(p.faults.map((f) => f.fault)).toEqual(
          p.id === 'storm-100'
            ? ['kill-master']
            : p.id.startsWith('crowd-')
              ? []
              : ['kill-master', 'kill-lock-node', 'kill-worker', 'sigstop'],
        )
        for (const f of p.faults) {
          expect(f.error, `${s.strategy} ${p.id} ${f.label}`).toBeUndefined()
          expect(f.appliedMs).toBeGreaterThanOrEqual(f.startedMs)
          expect(f.endedMs).toBeGreaterThanOrEqual(f.appliedMs!)
        }
        expect(p.summary.faults).toHaveLength(p.faults.length)
        expect(p.stockRemaining.length).toBeGreaterThan(0)
      }
    }
  })

  it('lua is answered again under the retry storm while its master stays dead (issue 13)', () => {
    const storm = strategy('lua').phases.find((p) => p.id === 'storm-100')!
    const [kill] = storm.summary.faults
    expect(kill?.recoveryMs).not.toBeNull()
    expect(kill!.recoveryMs!).toBeLessThanOrEqual(10_000)
    // The crowd went on after the kill and got final answers.
    expect(storm.summary.byStatus['409']).toBeGreaterThan(100)
    expect(storm.summary.byStatus['500']).toBeUndefined()
  })

  it.each(['lua', 'redlock'])(
    '%s holds every invariant: 0 oversold, persisted = sold, nobody twice, no double charge',
    (name) => {
      for (const p of strategy(name).phases) {
        const r = p.summary
        expect(r.verdict, `${name} ${p.id}: ${(r.notes ?? []).join('; ')}`).toBe('pass')
        expect(r.oversold).toBe(0)
        expect(r.duplicates).toBe(0)
        expect(r.doubleCharges).toBe(0)
        expect(r.sold).toBeGreaterThan(0)
        expect(r.persisted).toBeGreaterThan(0)
        expect(r.persisted).toBeLessThanOrEqual(p.stock)
      }
    },
  )

  it('compares the same crowd with and without the waiting room (lua, naive); redlock says why it cannot', () => {
    const refused = strategy('redlock').roomComparison
    expect(refused && 'skipped' in refused && refused.skipped).toMatch(/400 INVALID_REQUEST.*waiting_room/)
    for (const name of ['lua', 'naive']) {
      const c = strategy(name).roomComparison
      if (!c || 'skipped' in c) throw new Error(`${name}: no comparison: ${JSON.stringify(c)}`)
      const plan = { users: 200, stock: 50 } // phasePlans('quick'): crowdPair(50, 200, 2, 1)
      expect(c).toMatchObject({ users: plan.users, stock: plan.stock })
      expect(c.room.settings).toMatchObject({ admit_per_second: 50, max_admitted: 50, stock_factor: 2 })
      for (const run of [c.direct, c.room]) {
        const f = run.figures
        const what = `${name} ${run.phase}`
        // The same users, each recorded with every request it sent.
        expect(f.users, what).toBe(plan.users)
        expect(f.requests, what).toBe(Object.values(run.requestsByOp).reduce((a, b) => a + b, 0))
        expect(f.requests, what).toBeGreaterThanOrEqual(f.users)
        expect(f.requestsPerUser.max, what).toBeGreaterThanOrEqual(1)
        expect(f.requestsPerUser.mean, what).toBeCloseTo(f.requests / f.users, 1)
        expect(f.bought, what).toBeGreaterThan(0)
        // Naive's lost update (`SET stock <read - 1>` from a read made before others sold the
        // last units) can raise the stock after buyers were told SOLD_OUT: the room, reading
        // stock > 0, does not say sold_out, and the admitted users who were refused keep their
        // places until their admission expires (30 s), so no one else is let in: users still in
        // line give up at their patience (30 s). Seen once beside a CPU-bound process (69 of 200),
        // where the window between the read and the write is widest. Lua's stock never rises.
        if (name === 'lua') expect(f.outcomes.gave_up ?? 0, what).toBe(0)
        expect(f.outcomes.error ?? 0, what).toBe(0)
        expect(f.outcomes.stopped ?? 0, what).toBe(0)
        expect(f.spearman!, what).toBeGreaterThanOrEqual(-1)
        expect(f.spearman!, what).toBeLessThanOrEqual(1)
        expect(f.firstArrivalsShare!, what).toBeGreaterThan(0)
        expect(f.firstArrivalsShare!, what).toBeLessThanOrEqual(1)
        expect(run.opensAtMs, what).toBeGreaterThan(0)
      }
      expect(c.direct.requestsByOp).toEqual({ checkout: c.direct.figures.requests })
      // Through the room: one join per user; a checkout only once admitted, so the refused
      // crowd's clicks became polls.
      expect(c.room.requestsByOp.join).toBe(plan.users)
      expect(c.room.requestsByOp.checkout).toBeLessThan(c.direct.requestsByOp.checkout!)
      expect(c.room.figures.waitToAdmissionMs).not.toBeNull()
      expect(c.direct.figures.waitToAdmissionMs).toBeNull()
      // Users still trying at the sell-out learnt it at their next click (100–300 ms apart) or
      // their next poll (poll_after_seconds, at most 10 s); 1 s of slack for a loaded machine.
      // (naive ignores the opening and its race may sell to everyone: then nobody is told sold out.)
      expect(c.direct.figures.lastWaiters?.maxMs ?? 0).toBeLessThanOrEqual(1_300)
      expect(c.room.figures.lastWaiters?.maxMs ?? 0).toBeLessThanOrEqual(11_000)
    }
    // lua keeps the opening and sells exactly the stock, both ways; the room admits nobody before it.
    const lua = strategy('lua').roomComparison as Exclude<RoomComparison, { skipped: string }>
    for (const run of [lua.direct, lua.room]) {
      expect(run.figures.outcomes).toEqual({ purchased: 50, sold_out: 150 })
      expect(run.figures.soldOutAtMs).not.toBeNull()
      expect(run.figures.soldOutAtMs!).toBeGreaterThan(run.opensAtMs)
      // Users came before the opening and were still trying when it sold out.
      expect(run.figures.lastWaiters!.count).toBeGreaterThan(0)
    }
    expect(lua.room.figures.waitToAdmissionMs!.max).toBeGreaterThan(0)
  })

  // Naive oversells only when two checkouts interleave between its read and its write: the demo's
  // load makes that likely, not certain (the quick profile on a quiet machine may sell cleanly).
  // The oversell itself is forced in apps/flash-sale/test/integration/checkout-naive.test.ts; here
  // the demo must say which happened, and count an oversell as expected, never as a failure.
  it('naive: the verdict says whether it oversold, and an oversell is expected, not a failure', () => {
    let oversold = 0
    for (const p of strategy('naive').phases) {
      const r = p.summary
      const what = `naive ${p.id}: ${(r.notes ?? []).join('; ')}`
      expect(r.verdict, what).not.toBe('fail')
      oversold += r.oversold
      if (r.oversold > 0) {
        expect(r.verdict, what).toBe('expected-fail')
        expect(r.sold, what).toBeGreaterThan(p.stock)
        expect(
          r.notes?.some((n) => n.startsWith(`oversold ${r.oversold} unit(s)`)),
          what,
        ).toBe(true)
      } else if (r.verdict === 'pass') {
        expect(r.notes, what).toContain('naive did not oversell this time')
      }
    }
    expect(result.ok).toBe(true)
    expect(result.input.verdict.details).toContainEqual(
      oversold > 0
        ? expect.stringMatching(new RegExp(`^naive oversold ${oversold} unit\\(s\\), as expected`))
        : expect.stringMatching(/^naive did not oversell this time/),
    )
  })

  it('writes the HTML report and its JSON', () => {
    expect(existsSync(result.reportFile)).toBe(true)
    const html = readFileSync(result.reportFile, 'utf8')
    expect(html).toContain('Flash sale under load and chaos')
    expect(html).toContain('uPlot')
    expect(html).toContain('Waiting room vs no room')
    expect(html).not.toContain('Money and the life of an order')
    const json = JSON.parse(readFileSync(join(dir, 'report', 'report.json'), 'utf8'))
    expect(json.verdict.ok).toBe(true)
  })
})
