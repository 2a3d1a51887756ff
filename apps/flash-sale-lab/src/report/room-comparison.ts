// The report's "Waiting room vs no room" card and the same figures as text for the demo's console:
// per strategy, one row per figure, one column per crowd. Built from StrategyReport.roomComparison.

import { esc } from './html-escape.js'
import type { CrowdRun, ReportInput, RoomComparison, StrategyReport } from './report-input.js'

type Ran = Exclude<RoomComparison, { skipped: string }>
const ran = (c: RoomComparison | undefined): c is Ran => c !== undefined && !('skipped' in c)

const int = (n: number) => Math.round(n).toLocaleString('en')
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`
const share = (x: number | null) => (x === null ? '–' : `${Math.round(x * 100)} %`)

/** The figures, as [label, value without a room, value with it]. */
export function comparisonRows(c: Ran): [string, string, string][] {
  const both = (f: (r: CrowdRun) => string): [string, string] => [f(c.direct), f(c.room)]
  const ops = (r: CrowdRun) =>
    ['checkout', 'join', 'poll']
      .filter((op) => (r.requestsByOp[op] ?? 0) > 0)
      .map((op) => `${int(r.requestsByOp[op]!)} ${op}`)
      .join(' · ')
  const outcomes = (r: CrowdRun) =>
    Object.entries(r.figures.outcomes)
      .filter(([k]) => k !== 'purchased' && k !== 'sold_out')
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || '–'
  const waiters = (r: CrowdRun) => {
    const w = r.figures.lastWaiters
    return w === null ? '–' : `${sec(w.maxMs)} (p50 ${sec(w.p50Ms)}, ${int(w.count)} users)`
  }
  return [
    ['users arriving', ...both((r) => int(r.figures.users))],
    ['bought', ...both((r) => int(r.figures.bought))],
    ['told sold out', ...both((r) => int(r.figures.outcomes.sold_out ?? 0))],
    ['other outcomes', ...both(outcomes)],
    ['requests, total', ...both((r) => `${int(r.figures.requests)} (${ops(r)})`)],
    [
      'requests per user: mean · p50 · max',
      ...both((r) => {
        const s = r.figures.requestsPerUser
        return `${s.mean.toFixed(2)} · ${s.p50} · ${s.max}`
      }),
    ],
    ['requests per unit bought', ...both((r) => r.figures.requestsPerPurchase?.toFixed(1) ?? '–')],
    [
      'fairness: Spearman ρ, arrival vs purchase order of the buyers',
      ...both((r) => r.figures.spearman?.toFixed(2) ?? '–'),
    ],
    [
      'fairness: share of the first N arrivals who bought (N = bought)',
      ...both((r) => share(r.figures.firstArrivalsShare)),
    ],
    [
      'sold out at (the opening at)',
      ...both((r) =>
        r.figures.soldOutAtMs === null
          ? 'not sold out'
          : `${sec(r.figures.soldOutAtMs)} (${sec(r.opensAtMs)})`,
      ),
    ],
    ['last user still waiting then, told sold out after', ...both(waiters)],
    [
      'join to admission: p50 · max',
      ...both((r) => {
        const w = r.figures.waitToAdmissionMs
        return w === null ? '–' : `${sec(w.p50)} · ${sec(w.max)}`
      }),
    ],
    [
      'p99 latency of every request',
      ...both((r) => `${r.p99Ms >= 100 ? int(r.p99Ms) : r.p99Ms.toFixed(1)} ms`),
    ],
  ]
}

function strategyBlock(s: StrategyReport): string {
  const c = s.roomComparison
  if (!c) return ''
  if (!ran(c))
    return `<div class="room-strategy" data-strategy="${esc(s.strategy)}"><h3><code>${esc(s.strategy)}</code></h3><p class="skipped">${esc(c.skipped)}</p></div>`
  const settings = Object.entries(c.room.settings ?? {})
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')
  const rows = comparisonRows(c)
    .map(([label, a, b]) => `<tr><td class="l">${esc(label)}</td><td>${esc(a)}</td><td>${esc(b)}</td></tr>`)
    .join('\n')
  return `<div class="room-strategy" data-strategy="${esc(s.strategy)}"><h3><code>${esc(s.strategy)}</code></h3>
<p class="desc">${int(c.users)} users, ${int(c.stock)} units; room: ${esc(settings || 'defaults')}</p>
<div class="table-wrap"><table class="comparison"><thead><tr><th class="l">figure</th><th>no room</th><th>waiting room</th></tr></thead>
<tbody>${rows}</tbody></table></div></div>`
}

/** The card, or '' when no strategy has a comparison (reports made before it). */
export function comparisonSection(input: ReportInput): string {
  // Those that ran first: a skipped one is a sentence, not a table.
  const ordered = [...input.strategies].sort(
    (a, b) => Number(ran(b.roomComparison)) - Number(ran(a.roomComparison)),
  )
  const blocks = ordered.map(strategyBlock).filter((b) => b !== '')
  if (blocks.length === 0) return ''
  return `<section class="card" id="room-comparison"><h2 class="section">Waiting room vs no room: the same crowd</h2>
<p class="desc">The same users (ids 1..N, arriving at the same moments) buy the same stock twice: straight at the
checkout, where every refusal (429, 503, no answer, not started yet) is clicked again within 100–300 ms, and through
the sale's waiting room, polled as its page does (poll_after_seconds). The sale opens shortly after the first users
arrive; without a room the early ones click until it does, with one they join, and a place taken before the opening
is ranked by the room's draw, not by arrival. No fault is injected.</p>
<div class="room-grid">${blocks.join('\n')}</div></section>`
}

/** The same, as text for the end of the demo's output. */
export function formatComparison(s: StrategyReport): string[] {
  const c = s.roomComparison
  if (!c) return []
  if (!ran(c)) return [`  waiting room vs no room: ${c.skipped}`]
  const rows = comparisonRows(c)
  const w = Math.max(...rows.map((r) => r[0].length))
  const v = Math.max(...rows.map((r) => r[1].length), 'no room'.length)
  return [
    `  waiting room vs no room (${c.users} users, ${c.stock} units):`,
    `    ${''.padEnd(w)}  ${'no room'.padEnd(v)}  waiting room`,
    ...rows.map(([label, a, b]) => `    ${label.padEnd(w)}  ${a.padEnd(v)}  ${b}`),
  ]
}
