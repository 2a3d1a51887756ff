// renderReport: one self-contained HTML page (uPlot's IIFE and CSS inlined from node_modules, the
// data as a JSON block, no network) with a verdict banner, the summary table and, per strategy
// and phase, four synced plots with the fault windows marked. writeReport writes it as index.html.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { type ChartModel, faultWindows, phaseCharts } from './chart-model.js'
import { CLIENT_SCRIPT } from './client-script.js'
import { esc } from './html-escape.js'
import { moneySection } from './money-card.js'
import type { FaultImpact, PhaseReport, ReportInput, StrategyReport, SummaryRow } from './report-input.js'
import { comparisonSection } from './room-comparison.js'
import { REPORT_CSS } from './styles.js'

const require = createRequire(import.meta.url)

let uplotAssets: { js: string; css: string } | undefined
/** uPlot 1.6's browser build (IIFE, global `uPlot`) and CSS, read once from node_modules. */
function uplot(): { js: string; css: string } {
  if (!uplotAssets) {
    uplotAssets = {
      js: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
      css: readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
    }
  }
  return uplotAssets
}

/** `</script>` inside inlined text would end the element early. */
const scriptSafe = (s: string) => s.replace(/<\/(script)/gi, '<\\/$1')

const int = (n: number) => Math.round(n).toLocaleString('en')
const ms = (n: number) => (n >= 100 ? int(n) : n.toFixed(1))
const seconds = (msValue: number | null) => (msValue === null ? 'never' : `${(msValue / 1000).toFixed(1)} s`)

const VERDICT_TEXT: Record<SummaryRow['verdict'], string> = {
  pass: 'invariants held',
  fail: 'INVARIANT BROKEN',
  'expected-fail': 'broke, as expected',
}

/** The table's narrow column. */
const VERDICT_SHORT: Record<SummaryRow['verdict'], string> = {
  pass: 'held',
  fail: 'BROKEN',
  'expected-fail': 'as expected',
}

function statusGroups(byStatus: Record<string, number>) {
  let ok = 0
  let other = 0
  for (const [code, n] of Object.entries(byStatus)) {
    if (code === '200' || code === '202') ok += n
    else if (code !== '409' && code !== '429' && code !== '503') other += n
  }
  return { ok, c409: byStatus['409'] ?? 0, c429: byStatus['429'] ?? 0, c503: byStatus['503'] ?? 0, other }
}

/** A count that must be 0: red when it is not. */
function invariantCell(n: number): string {
  return `<td class="${n > 0 ? 'bad' : 'zero'}">${int(n)}</td>`
}

const failedSum = (faults: FaultImpact[]) => faults.reduce((a, f) => a + f.failed, 0)
const totalSum = (faults: FaultImpact[]) => faults.reduce((a, f) => a + f.total, 0)

function summaryTable(input: ReportInput): string {
  const rows: string[] = []
  for (const s of input.strategies) {
    s.phases.forEach((p, i) => {
      const r = p.summary
      const g = statusGroups(r.byStatus)
      rows.push(`<tr class="${i === 0 ? 'first-of-strategy' : ''}">
  <td class="l">${i === 0 ? `<b>${esc(s.strategy)}</b>` : ''}</td><td class="l">${esc(p.label)}</td>
  <td>${int(r.requestsPerSecond)}</td><td>${ms(r.p50Ms)}</td><td>${ms(r.p99Ms)}</td><td>${ms(r.maxMs)}</td>
  <td>${int(g.ok)}</td><td>${int(g.c409)}</td><td>${int(g.c429)}</td><td>${int(g.c503)}</td><td>${int(g.other)}</td>
  <td>${int(r.sold)}</td>${invariantCell(r.oversold)}<td class="${r.persisted === r.sold ? 'good' : 'bad'}">${int(r.persisted)}</td>
  ${invariantCell(r.duplicates)}${invariantCell(r.doubleCharges)}
  ${r.faults.length === 0 ? '<td class="zero">no fault</td><td class="zero">–</td>' : `<td>${int(failedSum(r.faults))} / ${int(totalSum(r.faults))}</td><td>${seconds(r.recoveryMs)}</td>`}
  <td class="l"><span class="verdict ${r.verdict}">${VERDICT_SHORT[r.verdict]}</span></td>
</tr>`)
    })
  }
  return `<section class="card"><h2 class="section">Summary</h2><div class="table-wrap"><table class="summary">
<thead><tr><th class="l">Strategy</th><th class="l">Phase</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th>
<th>2xx</th><th>409</th><th>429</th><th>503</th><th>other</th><th>sold</th><th>oversold</th><th>persisted</th>
<th>duplicates</th><th>double charges</th><th>failed in faults</th><th>recovery</th><th class="l">verdict</th></tr></thead>
<tbody>${rows.join('\n')}</tbody></table></div></section>`
}

function faultChips(phase: PhaseReport): string {
  const windows = faultWindows(phase)
  if (windows.length === 0) return ''
  const chips = windows.map((w, i) => {
    const impact = phase.summary.faults.find((f) => f.label === phase.faults[i]?.label)
    const effect = impact
      ? ` · ${int(impact.failed)} of ${int(impact.total)} failed · recovered ${seconds(impact.recoveryMs)}`
      : ''
    const failed = w.error === undefined ? '' : ` · fault failed: ${esc(w.error)}`
    return `<span class="fault${w.error === undefined ? '' : ' failed'}"><span class="num">${i + 1}</span><b>${esc(w.label)}</b> at ${w.start.toFixed(1)} s–${w.end.toFixed(1)} s${effect}${failed}</span>`
  })
  return `<div class="faults">${chips.join('')}</div>`
}

function phaseSection(strategy: StrategyReport, phase: PhaseReport, charts: ChartModel[]): string {
  const r = phase.summary
  const notes = r.notes?.length ? ` · ${r.notes.map(esc).join(' · ')}` : ''
  const figures = charts
    .map(
      (c) =>
        `<figure><figcaption>${esc(c.title)}</figcaption><div class="chart" data-chart="${esc(c.id)}" data-kind="${c.kind}" data-series="${c.series.length}"></div></figure>`,
    )
    .join('\n')
  return `<div class="phase" id="${esc(`${strategy.strategy}-${phase.id}`)}">
<div class="phase-head"><h3>${esc(phase.label)}</h3>
<span class="stats"><b>${int(r.requestsPerSecond)}</b> req/s · p99 <b>${ms(r.p99Ms)}</b> ms · sold <b>${int(r.sold)}</b> of ${int(phase.stock)}
· oversold <b class="${r.oversold > 0 ? 'bad' : ''}">${int(r.oversold)}</b> · persisted <b>${int(r.persisted)}</b>${notes}</span>
<span class="verdict ${r.verdict}">${VERDICT_TEXT[r.verdict]}</span></div>
${faultChips(phase)}
<div class="grid">${figures}</div></div>`
}

function strategySection(strategy: StrategyReport, charts: Map<PhaseReport, ChartModel[]>): string {
  const broke = strategy.phases.some((p) => p.summary.verdict === 'fail')
  const expectedCorrect = strategy.expectedCorrect ?? true
  const verdict = broke
    ? 'fail'
    : strategy.phases.some((p) => p.summary.verdict === 'expected-fail')
      ? 'expected-fail'
      : 'pass'
  const expectation = expectedCorrect
    ? 'expected to hold every invariant'
    : 'expected to oversell: the baseline'
  return `<section class="card" id="strategy-${esc(strategy.strategy)}">
<div class="strategy-head"><h2><code>${esc(strategy.strategy)}</code></h2><span class="verdict ${verdict}">${VERDICT_TEXT[verdict]}</span>
<span class="stats">${expectation}</span></div>
${strategy.description ? `<p class="desc">${esc(strategy.description)}</p>` : ''}
${strategy.phases.map((p) => phaseSection(strategy, p, charts.get(p) ?? [])).join('\n')}
</section>`
}

// Inline SVG: emoji need a colour font that headless and minimal systems lack.
const ICON_PASS =
  '<svg width="30" height="30" viewBox="0 0 24 24" aria-label="pass"><circle cx="12" cy="12" r="11" fill="#16a34a"/><path d="M6.5 12.5l3.5 3.5 7.5-8" stroke="#fff" stroke-width="2.4" fill="none" stroke-linecap="round" stroke-linejoin="round"/></svg>'
const ICON_FAIL =
  '<svg width="30" height="30" viewBox="0 0 24 24" aria-label="fail"><circle cx="12" cy="12" r="11" fill="#dc2626"/><path d="M8 8l8 8M16 8l-8 8" stroke="#fff" stroke-width="2.4" stroke-linecap="round"/></svg>'

const GLOSSARY: [string, string][] = [
  ['req/s', 'HTTP answers per second over the phase, every status.'],
  ['p50 / p99 / max', 'Latency of answered requests, exact nearest-rank percentiles, send to last byte.'],
  [
    '2xx · 409 · 429 · 503',
    'Order accepted · sold out or already bought · busy, retry · service unavailable.',
  ],
  ['sold', 'Purchases the service confirmed (200/202).'],
  ['oversold', 'Confirmed beyond the units on sale. Must be 0.'],
  ['persisted', 'Orders in the database at the end. Must equal sold.'],
  ['duplicates', 'A second order for the same user and product. Must be 0.'],
  ['double charges', 'A payment taken twice for one purchase (a double click that got through). Must be 0.'],
  ['failed in faults', 'Requests answered 5xx or not at all while a fault was in effect, of all sent then.'],
  ['recovery', 'From a fault to the first second with successful answers again (longest of the phase).'],
  [
    'paid · failed INSUFFICIENT_FUNDS · returned · expired · cancelled',
    'Money phases: orders paid (confirmed at once, or paid while held); orders the worker could not charge; units given back to the sale (failed, cancelled, expired; a unit can come back more than once); held orders not paid by pay_by; held orders cancelled by their buyer.',
  ],
  [
    'stock = sold + returned + remaining',
    'Checked as stock = sold + remaining + pending and reserved = sold + returned + pending: sold = units held by orders in SQL, remaining = the stock in Redis, pending = returns not yet back in Redis (0 once drained), reserved = every unit ever reserved.',
  ],
  [
    'Spearman ρ',
    'Rank correlation between the order in which the buyers arrived and the order in which they bought: 1 = in arrival order, about 0 = arrival did not matter.',
  ],
  [
    'first N arrivals who bought',
    'Of the first N users to arrive (N = units bought), the share who bought: 100 % = first come, first served.',
  ],
  [
    'told sold out after',
    'From the last purchase answer (the sell-out, as the clients saw it) to the moment each user still trying then was told it had sold out.',
  ],
]

export function renderReport(input: ReportInput): string {
  const { js, css } = uplot()
  const charts = new Map<PhaseReport, ChartModel[]>()
  for (const s of input.strategies) for (const p of s.phases) charts.set(p, phaseCharts(s, p))
  const models = [...charts.values()].flat()
  const title = input.title ?? 'Flash sale under load and chaos'
  const meta = Object.entries(input.meta ?? {})
    .map(([k, v]) => `<span class="chip">${esc(k)} <b>${esc(v)}</b></span>`)
    .join('')
  const v = input.verdict
  const details = v.details?.length ? `<ul>${v.details.map((d) => `<li>${esc(d)}</li>`).join('')}</ul>` : ''
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${css}</style>
<style>${REPORT_CSS}</style>
</head><body><main>
<header><h1>${esc(title)}</h1>
<div class="sub">Run of ${esc(input.generatedAt)} · ${input.strategies.length} strategies · faults marked on every plot by numbered dashed lines</div>
<div class="chips">${meta}</div></header>
<div class="banner ${v.ok ? 'pass' : 'fail'}" role="status"><div class="icon">${v.ok ? ICON_PASS : ICON_FAIL}</div>
<div><h2>${esc(v.headline)}</h2>${details}</div></div>
${summaryTable(input)}
${comparisonSection(input)}
${moneySection(input)}
${input.strategies.map((s) => strategySection(s, charts)).join('\n')}
<section class="card"><h2 class="section">What the numbers mean</h2><dl class="glossary">
${GLOSSARY.map(([k, d]) => `<dt>${esc(k)}</dt><dd>${esc(d)}</dd>`).join('\n')}
</dl></section>
<footer>Generated by kunci's flash-sale demo. Self-contained: plots drawn with uPlot, inlined; no network needed.</footer>
</main>
<script>${scriptSafe(js)}</script>
<script type="application/json" id="report-data">${JSON.stringify(models).replace(/</g, '\\u003c')}</script>
<script>${scriptSafe(CLIENT_SCRIPT)}</script>
</body></html>
`
}

/** Writes `${dir}/index.html` (creating dir) and returns its path. */
export function writeReport(dir: string, input: ReportInput): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'index.html')
  writeFileSync(file, renderReport(input))
  return file
}
