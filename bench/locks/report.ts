import type { Library } from './driver.js'
import { metricsFor, type PhaseSummary } from './metrics.js'
import { PHASE_TITLES, type Phase } from './phases.js'

/** The targets of issue 2 section 6, each a ratio of kunci's median to the best peer's median. */
export interface TargetDef {
  id: string
  label: string
  phase: Phase
  metric: string
  /** higher: kunci ÷ best ≥ factor; lower: kunci ÷ best ≤ factor. */
  factor: number
}

export const TARGETS: readonly TargetDef[] = [
  { id: 'a-c1', label: '(a) C=1 ops/s', phase: 'a-c1', metric: 'opsPerSec', factor: 1.1 },
  { id: 'a-c64', label: '(a) C=64 ops/s', phase: 'a-c64', metric: 'opsPerSec', factor: 2.5 },
  {
    id: 'b-acq',
    label: '(b) acquisitions/s',
    phase: 'b-contended',
    metric: 'acquisitionsPerSec',
    factor: 1.3,
  },
  { id: 'b-wait', label: '(b) wait p99', phase: 'b-contended', metric: 'waitP99Ms', factor: 1 / 5 },
  {
    id: 'b-cmds',
    label: '(b) Redis cmds/acq',
    phase: 'b-contended',
    metric: 'serverCmdsPerAcq',
    factor: 1 / 4,
  },
  {
    id: 'c-c64',
    label: '(c) single-node C=64 ops/s',
    phase: 'c-single-c64',
    metric: 'opsPerSec',
    factor: 1.2,
  },
]

export interface TargetOutcome {
  id: string
  label: string
  kunci: number
  bestPeer: Library | undefined
  bestPeerValue: number
  ratio: number
  required: string
  verdict: 'PASS' | 'MISS' | 'n/a'
  /** How far the ratio is from the requirement, as a fraction of the requirement (0 on PASS). */
  shortfall: number
}

function bestPeer(summary: PhaseSummary, metric: string, better: 'higher' | 'lower') {
  let best: { library: Library; value: number } | undefined
  for (const [library, row] of Object.entries(summary) as [Library, PhaseSummary[Library]][]) {
    const value = row?.[metric]?.median
    if (library === 'kunci' || value === undefined || !Number.isFinite(value)) continue
    if (!best || (better === 'higher' ? value > best.value : value < best.value)) best = { library, value }
  }
  return best
}

export function evaluateTargets(summaries: Record<Phase, PhaseSummary>): TargetOutcome[] {
  return TARGETS.map((t) => {
    const better = metricsFor(t.phase).find((m) => m.key === t.metric)!.better
    const best = bestPeer(summaries[t.phase], t.metric, better)
    const kunci = summaries[t.phase].kunci?.[t.metric]?.median ?? Number.NaN
    const ratio = best ? kunci / best.value : Number.NaN
    const required =
      better === 'higher' ? `≥ ${t.factor}×` : `≤ ${Number(t.factor.toFixed(3))}× (1/${1 / t.factor})`
    const pass = better === 'higher' ? ratio >= t.factor : ratio <= t.factor
    const shortfall = pass ? 0 : better === 'higher' ? 1 - ratio / t.factor : ratio / t.factor - 1
    return {
      id: t.id,
      label: t.label,
      kunci,
      bestPeer: best?.library,
      bestPeerValue: best?.value ?? Number.NaN,
      ratio,
      required,
      verdict: Number.isFinite(ratio) ? (pass ? 'PASS' : 'MISS') : 'n/a',
      shortfall: Number.isFinite(ratio) ? shortfall : Number.NaN,
    }
  })
}

function fmt(value: number, decimals: number): string {
  if (!Number.isFinite(value)) return '–'
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals })
}

/** Markdown: one row per library, each cell "median (min–max)", then kunci ÷ best peer. */
export function phaseTable(phase: Phase, summary: PhaseSummary, libraries: readonly Library[]): string {
  const metrics = metricsFor(phase)
  const lines = [
    `### ${PHASE_TITLES[phase]}`,
    '',
    `| library | ${metrics.map((m) => m.label).join(' | ')} |`,
    `|---|${metrics.map(() => '---:').join('|')}|`,
  ]
  for (const library of libraries) {
    const row = summary[library]
    if (!row) continue
    const cells = metrics.map((m) => {
      const s = row[m.key]!
      if (m.sum || s.min === s.max) return fmt(s.median, m.decimals)
      return `${fmt(s.median, m.decimals)} (${fmt(s.min, m.decimals)}–${fmt(s.max, m.decimals)})`
    })
    lines.push(`| ${library} | ${cells.join(' | ')} |`)
  }
  if (summary.kunci) {
    const ratios = metrics.map((m) => {
      if (m.sum) return ''
      const best = bestPeer(summary, m.key, m.better)
      const kunci = summary.kunci?.[m.key]?.median ?? Number.NaN
      return best ? `${fmt(kunci / best.value, 2)}× (${best.library})` : '–'
    })
    lines.push(`| kunci ÷ best peer | ${ratios.join(' | ')} |`)
  }
  return lines.join('\n')
}

export function targetTable(outcomes: readonly TargetOutcome[]): string {
  const lines = [
    '### Targets (kunci median ÷ best peer median)',
    '',
    '| target | kunci | best peer | ratio | required | result | short by |',
    '|---|---:|---|---:|---|---|---:|',
  ]
  for (const o of outcomes) {
    const decimals = o.id === 'b-cmds' || o.id === 'b-wait' ? 1 : 0
    const peer = o.bestPeer ? `${o.bestPeer} ${fmt(o.bestPeerValue, decimals)}` : '–'
    const short = o.verdict === 'MISS' ? `${fmt(o.shortfall * 100, 0)} %` : ''
    lines.push(
      `| ${o.label} | ${fmt(o.kunci, decimals)} | ${peer} | ${fmt(o.ratio, 2)}× | ${o.required} | ${o.verdict} | ${short} |`,
    )
  }
  return lines.join('\n')
}
