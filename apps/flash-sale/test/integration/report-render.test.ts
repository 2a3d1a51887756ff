import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { phaseCharts } from '../../src/report/chart-model.js'
import { renderReport, writeReport } from '../../src/report/render-report.js'
import type { ReportInput } from '../../src/report/report-input.js'

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
    const file = writeReport(dir, fixture)
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
    expect(problems).toEqual([])
    expect(requests.every((u) => u.startsWith('file:'))).toBe(true)

    mkdirSync(ARTIFACTS, { recursive: true })
    const shot = await page.screenshot({ fullPage: true })
    writeFileSync(new URL('report.png', ARTIFACTS), shot)
    writeFileSync(new URL('report.html', ARTIFACTS), readFileSync(file))
    await page.close()
  })
})
