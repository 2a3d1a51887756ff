import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { crowdFigures } from '../../src/load/crowd-figures.js'
import type { LoadSeries, LoadUser } from '../../src/load/result.js'
import { faultWindows, phaseCharts } from '../../src/report/chart-model.js'
import { faultImpacts } from '../../src/report/fault-impact.js'
import { moneySection } from '../../src/report/money-card.js'
import { renderReport, writeReport } from '../../src/report/render-report.js'
import type { CrowdRun, MoneyFigures, ReportInput } from '../../src/report/report-input.js'
import { comparisonRows, formatComparison } from '../../src/report/room-comparison.js'

// A recorded run (see fixtures/report-fixture.make.ts): 3 strategies × 2 phases × 4 plots.
const fixture = JSON.parse(
  readFileSync(new URL('../fixtures/report-fixture.json', import.meta.url), 'utf8'),
) as ReportInput
const CHROMIUM = '/usr/bin/chromium'

// The few DOM shapes the in-page checks use: the project's tsconfig has no DOM lib (Node code).
interface PageCanvas {
  width: number
  height: number
  getContext(kind: '2d'): {
    getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray }
  }
}
interface PageElement {
  getAttribute(name: string): string | null
  querySelector(selector: string): unknown
  querySelectorAll(selector: string): { length: number }
}
interface PageGlobals {
  document: { querySelectorAll(selector: string): Iterable<PageElement> }
  __reportReady?: boolean
  __report?: { charts: unknown[] }
}
// A waiting-room comparison for lua and naive (redlock: skipped), from synthetic users: 40 users,
// 10 units; without the room the buyers are every fourth arrival, with it the first ten.
function crowdRun(mode: CrowdRun['mode']): CrowdRun {
  const users: LoadUser[] = Array.from({ length: 40 }, (_, i) => {
    const bought = mode === 'crowd' ? i % 4 === 0 : i < 10
    return {
      user_id: i + 1,
      arrivedMs: i * 50,
      admittedMs: mode === 'waiting-room' && bought ? 1_000 + i * 100 : null,
      position: mode === 'waiting-room' ? i + 1 : null,
      lineKey: mode === 'waiting-room' ? String(1_800_000_000_000_000 + i) : null,
      outcome: bought ? 'purchased' : 'sold_out',
      outcomeMs: bought ? 1_100 + i * 10 : 2_600 + i,
      reason: null,
      order_id: bought ? `o${i}` : null,
      requests: mode === 'crowd' ? 1 + (i % 7) : 3,
    }
  })
  const figures = crowdFigures(users)
  return {
    phase: mode === 'crowd' ? 'crowd-direct' : 'crowd-room',
    mode,
    ...(mode === 'waiting-room'
      ? { settings: { admit_per_second: 10, max_admitted: 10, stock_factor: 2 } }
      : {}),
    figures,
    requestsByOp:
      mode === 'crowd'
        ? { checkout: figures.requests }
        : { join: 40, poll: figures.requests - 50, checkout: 10 },
    opensAtMs: 1_000,
    p99Ms: 12.5,
  }
}
const withComparison: ReportInput = {
  ...fixture,
  strategies: fixture.strategies.map((s) => ({
    ...s,
    roomComparison:
      s.strategy === 'redlock'
        ? { skipped: 'not run: with STRATEGY=redlock the service refuses a sale with a waiting room' }
        : { stock: 10, users: 40, direct: crowdRun('crowd'), room: crowdRun('waiting-room') },
  })),
}

// Inside page.evaluate only inline code runs (the function's text is sent to the browser).
const ARTIFACTS = new URL('../../../../artifacts/', import.meta.url)

describe('renderReport', () => {
  it('is self-contained: uPlot inlined, no external URL, data escaped', () => {
    const html = renderReport(fixture)
    expect(html).toContain('uPlot')
    expect(html).not.toMatch(/<script[^>]+src=/i)
    expect(html).not.toMatch(/<link[^>]+href=/i)
    // The only URL is uPlot's licence header (github.com/leeoniya/uPlot): nothing is fetched.
    const urls = html.match(/https?:\/\/[^\s"')<]+/g) ?? []
    expect(urls.filter((u) => !u.startsWith('https://github.com/leeoniya/uPlot'))).toEqual([])
    const hostile: ReportInput = {
      ...fixture,
      title: '</script><script>alert(1)</script>',
      verdict: { ok: false, headline: '<img src=x onerror=alert(1)>' },
    }
    const escaped = renderReport(hostile)
    expect(escaped).not.toContain('<img src=x')
    expect(escaped).not.toContain('<script>alert(1)')
  })
})

describe('the waiting-room comparison', () => {
  it('renders a table per strategy that ran it, with both crowds, and the reason where it did not', () => {
    const html = renderReport(withComparison)
    expect(html).toContain('id="room-comparison"')
    const tables = html.match(/<table class="comparison">/g) ?? []
    expect(tables).toHaveLength(2)
    expect(html).toContain('refuses a sale with a waiting room')
    expect(renderReport(fixture)).not.toContain('id="room-comparison"')

    const lua = withComparison.strategies.find((s) => s.strategy === 'lua')!
    const rows = comparisonRows(lua.roomComparison as never)
    const row = (label: string) => rows.find((r) => r[0].startsWith(label))!
    expect(row('bought')).toEqual(['bought', '10', '10'])
    expect(row('requests, total')[2]).toBe('120 (10 checkout · 40 join · 70 poll)')
    // Without the room, every fourth arrival bought: 3 of the first 10. With it, the first 10.
    expect(row('fairness: share')).toEqual([expect.any(String), '30 %', '100 %'])
    expect(row('fairness: Spearman')).toEqual([expect.any(String), '1.00', '1.00'])
    expect(row('join to admission')[1]).toBe('–')
    // Admitted 1,000 + 50 × i ms after joining, i = 0..9: p50 (nearest rank) i = 4, max i = 9.
    expect(row('join to admission')[2]).toBe('1.20 s · 1.45 s')
    // Sold out at the last purchase (1,100 + 36 × 10 ms without the room). Still trying then: the
    // 22 non-buyers among arrivals 0..29; the last of them (i = 29) told at 2,629 ms.
    expect(row('sold out at')[1]).toBe('1.46 s (1.00 s)')
    expect(row('last user')[1]).toMatch(/^1\.17 s \(p50 .*, 22 users\)$/)
    expect(formatComparison(lua).join('\n')).toContain('waiting room vs no room (40 users, 10 units)')
    const redlock = withComparison.strategies.find((s) => s.strategy === 'redlock')!
    expect(formatComparison(redlock)).toEqual([
      '  waiting room vs no room: not run: with STRATEGY=redlock the service refuses a sale with a waiting room',
    ])
  })
})

// The books of a money sale: 30 units, 41 reserved, 11 failed INSUFFICIENT_FUNDS and came back.
const books: MoneyFigures = {
  payment: 'instant',
  price: 49.99,
  stock: 30,
  reserved: 41,
  sold: 30,
  paid: 30,
  held: 0,
  failedFunds: 11,
  failedOther: {},
  checkoutRefusedFunds: 0,
  cancelled: 0,
  expired: 0,
  returned: 11,
  pendingReturns: 0,
  remaining: 0,
  users: 90,
  balances: { sum: 2_099.31, min: 0, funded: 3_598.81, charged: 1_499.7 },
  payments: {},
  stockBalanced: true,
  returnsBalanced: true,
}

describe('the money card', () => {
  const phase = fixture.strategies[0]!.phases[0]!
  const withMoney = (m: MoneyFigures, verdict: 'pass' | 'fail' = 'pass'): ReportInput => ({
    ...fixture,
    strategies: fixture.strategies.map((s) => ({
      ...s,
      phases: [
        ...s.phases,
        { ...phase, id: 'money-instant', money: m, summary: { ...phase.summary, verdict } },
      ],
      ...(s.strategy === 'redlock'
        ? { moneySkipped: [{ phase: 'money-hold', reason: 'not run: answered 400 INVALID_REQUEST' }] }
        : {}),
    })),
  })

  it('shows per strategy and sale paid, failed, returned, expired, cancelled, remaining, balances and both equations', () => {
    const html = renderReport(withMoney(books))
    expect(html).toContain('id="money"')
    expect(html).toContain('stock = sold + returned + remaining')
    expect((html.match(/<tr class="[^"]*" data-phase="[a-z]+-money-instant">/g) ?? []).length).toBe(3)
    const lua = /data-phase="lua-money-instant">([\s\S]*?)<\/tr>/.exec(html)![1]!
    const cells = [...lua.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => m[1]!.replace(/<[^>]+>/g, ''))
    // strategy, sale + payment, stock, reserved, paid, failed, returned, expired, cancelled, remaining, Σ, min, …
    expect(cells.slice(1, 12)).toEqual([
      'money-instant instant',
      '30',
      '41',
      '30',
      '11',
      '11',
      '0',
      '0',
      '0',
      '2,099.31',
      '0.00',
    ])
    expect(cells[12]).toBe('30 = 30 + 0 + 0 ✓')
    expect(cells[13]).toBe('41 = 30 + 11 + 0 ✓')
    expect(html).toContain('not run: answered 400 INVALID_REQUEST')
    expect(renderReport(fixture)).not.toContain('id="money"')
  })

  it('marks broken books', () => {
    const broken = {
      ...books,
      remaining: 1,
      stockBalanced: false,
      balances: { ...books.balances, min: -49.99 },
    }
    const card = moneySection(withMoney(broken, 'fail'))
    expect(card).toContain('<td class="bad">30 = 30 + 1 + 0 ✗ BROKEN</td>')
    expect(card).toContain('<td class="bad">-49.99</td>')
    expect(card).toContain('<span class="verdict fail">BROKEN</span>')
  })
})

describe('faultImpacts and faultWindows', () => {
  // Seconds 1..6: a fault from 2.2 s to 3.5 s makes seconds 3 and 4 fail, second 5 is clean.
  const series: LoadSeries = {
    t: [1, 2, 3, 4, 5, 6],
    vus: [5, 5, 5, 5, 5, 5],
    requests: [100, 100, 90, 80, 100, 100],
    byStatus: { '200': [100, 100, 40, 70, 100, 100], '503': [0, 0, 50, 10, 0, 0] },
    transportErrors: [0, 0, 5, 0, 0, 0],
    p50Ms: [1, 1, 1, 1, 1, 1],
    p99Ms: [2, 2, 2, 2, 2, 2],
    maxMs: [3, 3, 3, 3, 3, 3],
  }
  const load = { series, startedAtMs: 10_000, durationMs: 6_000 }
  const event = { fault: 'kill-master', label: 'kill -9 master', at: 1_000, startedMs: 1_200, endedMs: 2_500 }

  it('counts failures in the seconds the fault overlaps and the time to the first clean second', () => {
    // The chaos run started 1 s after the load: the fault is at 2.2 s..3.5 s on the load's axis.
    const [impact] = faultImpacts(load, [event], 11_000)
    expect(impact).toEqual({
      label: 'kill -9 master',
      failed: 50 + 5 + 10,
      total: 95 + 80,
      recoveryMs: 1_800,
    })
    expect(
      faultWindows({
        ...fixture.strategies[0]!.phases[0]!,
        load: { ...load, latency: fixture.strategies[0]!.phases[0]!.load.latency },
        faults: [event],
        chaosStartedAtMs: 11_000,
      }),
    ).toEqual([{ label: 'kill -9 master', start: 2.2, end: 3.5 }])
  })

  it('reports 0 recovery for a harmless fault and null when requests never succeed again', () => {
    const harmless = { ...event, startedMs: 4_100, endedMs: 4_600 }
    expect(faultImpacts(load, [harmless])[0]).toMatchObject({ failed: 0, recoveryMs: 0 })
    const dead: LoadSeries = {
      ...series,
      byStatus: { '503': [0, 0, 90, 80, 100, 100] },
      requests: [0, 0, 90, 80, 100, 100],
    }
    expect(faultImpacts({ ...load, series: dead }, [event])[0]!.recoveryMs).toBeNull()
  })

  it('reports 0 for a fault that lasts past the end of the load and cost nothing', () => {
    const untilTheEnd = { ...event, startedMs: 4_100, endedMs: 9_000 }
    expect(faultImpacts(load, [untilTheEnd])[0]).toMatchObject({ failed: 0, recoveryMs: 0 })
  })
})

describe('the report in headless Chromium', () => {
  let browser: Browser
  let dir: string

  beforeAll(async () => {
    expect(existsSync(CHROMIUM), 'chromium missing: node scripts/ensure-tools.mjs chromium').toBe(true)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    })
    dir = mkdtempSync(join(tmpdir(), 'report-'))
  })
  afterAll(async () => {
    await browser?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('draws every plot from disk, with its series, fault marks and no console error', async () => {
    const file = writeReport(dir, withComparison)
    const page = await browser.newPage({ viewport: { width: 1480, height: 1000 }, deviceScaleFactor: 1 })
    const problems: string[] = []
    const requests: string[] = []
    page.on('console', (m) => (m.type() === 'error' || m.type() === 'warning') && problems.push(m.text()))
    page.on('pageerror', (e) => problems.push(e.message))
    page.on('request', (r) => requests.push(r.url()))
    await page.goto(pathToFileURL(file).href)
    await page.waitForFunction(
      () => (globalThis as unknown as PageGlobals).__reportReady === true,
      undefined,
      {
        timeout: 30_000,
      },
    )

    const expected = fixture.strategies.flatMap((s) => s.phases.flatMap((p) => phaseCharts(s, p)))
    expect(expected).toHaveLength(3 * 2 * 4)
    const drawn = await page.evaluate(() =>
      [...(globalThis as unknown as PageGlobals).document.querySelectorAll('.chart[data-chart]')].map(
        (el) => {
          const canvas = el.querySelector('.uplot canvas') as PageCanvas | null
          let coloured = 0
          if (canvas) {
            const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height)
            for (let i = 0; i < data.length; i += 4) {
              const [r, g, b, a] = [data[i]!, data[i + 1]!, data[i + 2]!, data[i + 3]!]
              // Series and fault marks are saturated colours; axes and grid are greys.
              if (a > 100 && Math.max(r, g, b) - Math.min(r, g, b) > 60) coloured++
            }
          }
          return {
            id: el.getAttribute('data-chart'),
            canvas: canvas !== null && canvas.width > 200 && canvas.height > 100,
            coloured,
            legend: el.querySelectorAll('.u-legend .u-series').length,
          }
        },
      ),
    )
    expect(drawn.map((d) => d.id)).toEqual(expected.map((c) => c.id))
    for (const [i, d] of drawn.entries()) {
      expect(d.canvas, d.id!).toBe(true)
      expect(d.coloured, `${d.id} looks blank`).toBeGreaterThan(200)
      // uPlot's legend has the x series plus one row per plotted series.
      expect(d.legend, d.id!).toBe(expected[i]!.series.length + 1)
    }
    const reported = await page.evaluate(() => (globalThis as unknown as PageGlobals).__report?.charts.length)
    expect(reported).toBe(expected.length)

    // The table has a row per strategy and phase; the banner tells the verdict.
    expect(await page.locator('table.summary tbody tr').count()).toBe(6)
    expect(await page.locator('.banner.pass').count()).toBe(fixture.verdict.ok ? 1 : 0)
    expect(await page.locator('.fault').count()).toBe(6 * 4)
    expect(await page.locator('#room-comparison .room-strategy').count()).toBe(3)
    expect(await page.locator('table.comparison tbody tr').count()).toBe(2 * 13)
    expect(problems).toEqual([])
    expect(requests.every((u) => u.startsWith('file:'))).toBe(true)

    mkdirSync(ARTIFACTS, { recursive: true })
    const shot = await page.screenshot({ fullPage: true })
    writeFileSync(new URL('report.png', ARTIFACTS), shot)
    writeFileSync(new URL('report.html', ARTIFACTS), readFileSync(file))
    await page.close()
  })
})
