// The markdown tables of one run (printed at the end; bench/RESULTS.md quotes them).
import { spread } from '../locks/stats.js'
import type { ClosedLoopSample } from './closed-loop.js'
import type { CpuCategory, CpuShare } from './cpu-share.js'
import type { Environment } from './environment.js'
import type { OpenLoopSample } from './open-loop.js'
import type { BenchSettings, Target } from './settings.js'

export interface ClosedRun {
  round: number
  target: Target
  loadAverage1m: number
  /** Order events the stacks' workers had not yet persisted when the run started. */
  backlogAtStart: number
  /** Cores used during the run (warm-up included), by who used them. */
  cpu: CpuShare
  sample: ClosedLoopSample
}

export interface OpenRun {
  round: number
  target: Target
  loadAverage1m: number
  backlogAtStart: number
  cpu: CpuShare
  sample: OpenLoopSample
}

/** The targets: lua ≥ 0.6× bare requests/s; p99 ≤ 5 ms at half of lua's maximum rate. */
export const GOALS = Object.freeze({ luaOverBare: 0.6, p99AtHalfMs: 5 })

const n0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–')
const n2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '–')
const range = (values: number[], f: (v: number) => string) => {
  const s = spread(values)
  return `${f(s.median)} (${f(s.min)}–${f(s.max)})`
}

function sumCounts(records: Record<string, number>[]): Record<string, number> {
  const out: Record<string, number> = {}
  for (const r of records) for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + v
  return out
}

/** '200 99.9 %, 429 0.1 % (BUSY)': the share of each status over all rounds, then error codes. */
export function codeMix(
  samples: {
    byStatus: Record<string, number>
    byErrorCode: Record<string, number>
    transportErrors: Record<string, number>
  }[],
): string {
  const status = sumCounts(samples.map((s) => s.byStatus))
  const codes = sumCounts(samples.map((s) => s.byErrorCode))
  const transport = sumCounts(samples.map((s) => s.transportErrors))
  const total =
    Object.values(status).reduce((a, b) => a + b, 0) + Object.values(transport).reduce((a, b) => a + b, 0)
  const pct = (v: number) => `${((100 * v) / Math.max(1, total)).toFixed(v * 1000 < total ? 2 : 1)} %`
  const parts = Object.entries(status)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${pct(v)}`)
  for (const [k, v] of Object.entries(transport)) parts.push(`${k} ${pct(v)}`)
  const named = Object.keys(codes)
  return parts.join(', ') + (named.length > 0 ? ` (${named.join(', ')})` : '')
}

export interface Summary {
  closed: Record<
    string,
    { rps: number[]; sales: number[]; p50: number[]; p99: number[]; mix: string; cpu: CpuShare[] }
  >
  /** lua ÷ bare requests/s, paired within each round. */
  ratios: Record<string, number[]>
  open: Record<
    string,
    { rate: number; p50: number[]; p99: number[]; p999: number[]; lagP99: number[]; mix: string }
  >
}

export function summarize(closed: ClosedRun[], open: OpenRun[]): Summary {
  const summary: Summary = { closed: {}, ratios: {}, open: {} }
  const targets = [...new Set(closed.map((c) => c.target))]
  for (const t of targets) {
    const runs = closed.filter((c) => c.target === t)
    summary.closed[t] = {
      rps: runs.map((r) => r.sample.requestsPerSecond),
      sales: runs.map((r) => r.sample.salesPerSecond),
      p50: runs.map((r) => r.sample.latency.p50Ms),
      p99: runs.map((r) => r.sample.latency.p99Ms),
      mix: codeMix(runs.map((r) => r.sample)),
      cpu: runs.map((r) => r.cpu),
    }
    if (t === 'bare' || !targets.includes('bare')) continue
    summary.ratios[t] = runs.flatMap((r) => {
      const bare = closed.find((c) => c.target === 'bare' && c.round === r.round)
      return bare ? [r.sample.requestsPerSecond / bare.sample.requestsPerSecond] : []
    })
  }
  for (const t of [...new Set(open.map((o) => o.target))]) {
    const runs = open.filter((o) => o.target === t)
    summary.open[t] = {
      rate: runs[0]!.sample.rate,
      p50: runs.map((r) => r.sample.latency.p50Ms),
      p99: runs.map((r) => r.sample.latency.p99Ms),
      p999: runs.map((r) => r.sample.latency.p999Ms),
      lagP99: runs.map((r) => r.sample.sendLag.p99Ms),
      mix: codeMix(runs.map((r) => r.sample)),
    }
  }
  return summary
}

export function formatReport(
  env: Environment,
  settings: BenchSettings,
  summary: Summary,
  file: string,
): string {
  const lines: string[] = []
  lines.push(
    `Commit ${env.commit.slice(0, 7)}${env.uncommitted.length > 0 ? ' (+ uncommitted changes, see JSON)' : ''}, ${env.date.slice(0, 16)}Z; ${env.cores} × ${env.cpu}, ${env.memoryGb} GB; Node ${env.node}, Redis ${env.redis}, PostgreSQL ${env.postgres}; load average at start ${env.loadAverageAtStart.join(' / ')}. ${settings.rounds} interleaved rounds, medians (min–max). Raw samples: \`${file}\`.`,
    '',
    `Closed loop: ${settings.connections} connections, no think time, ${settings.closedSeconds} s measured after ${settings.closedWarmupS} s of ramp; ${settings.instances} service processes (node:cluster) per target.`,
    '',
    '| target | requests/s | sales (200/202)/s | ÷ bare (paired per round) | p50 ms | p99 ms | answers |',
    '|---|---:|---:|---:|---:|---:|---|',
  )
  for (const [t, c] of Object.entries(summary.closed)) {
    const ratio = summary.ratios[t]
    lines.push(
      `| ${t} | ${range(c.rps, n0)} | ${range(c.sales, n0)} | ${ratio ? range(ratio, n2) : t === 'bare' ? '1' : '–'} | ${range(c.p50, n2)} | ${range(c.p99, n2)} | ${c.mix} |`,
    )
  }
  const categories: CpuCategory[] = ['loadgen', 'service', 'worker', 'redis', 'postgres', 'host', 'other']
  lines.push(
    '',
    'Where the cores went during the closed-loop runs (CPU seconds per second, medians; "other" is everything else on the machine, i.e. other users):',
    '',
    `| target | ${categories.join(' | ')} | total | service CPU µs per request |`,
    `|---|${categories.map(() => '---:').join('|')}|---:|---:|`,
  )
  for (const [t, c] of Object.entries(summary.closed)) {
    const med = (k: CpuCategory) => spread(c.cpu.map((x) => x[k] ?? 0)).median
    const total = spread(c.cpu.map((x) => Object.values(x).reduce((a, b) => a + b, 0))).median
    // Approximate: the CPU window includes the ramp, the rate does not.
    const perRequest = spread(c.cpu.map((x, i) => ((x.service ?? 0) * 1e6) / c.rps[i]!)).median
    lines.push(
      `| ${t} | ${categories.map((k) => n2(med(k))).join(' | ')} | ${n2(total)} | ${n0(perRequest)} |`,
    )
  }
  if (Object.keys(summary.open).length > 0) {
    lines.push(
      '',
      `Open loop: a fixed rate of ${settings.openRateShare} × the target's closed-loop median, latency from each request's scheduled time (no coordinated omission), ${settings.openSeconds} s measured after ${settings.openWarmupS} s.`,
      '',
      '| target | rate/s | p50 ms | p99 ms | p99.9 ms | send lag p99 ms | answers |',
      '|---|---:|---:|---:|---:|---:|---|',
    )
    for (const [t, o] of Object.entries(summary.open)) {
      lines.push(
        `| ${t} | ${n0(o.rate)} | ${range(o.p50, n2)} | ${range(o.p99, n2)} | ${range(o.p999, n2)} | ${range(o.lagP99, n2)} | ${o.mix} |`,
      )
    }
  }
  const goals: string[] = []
  const lua = summary.ratios['lua-replica']
  if (lua) {
    const m = spread(lua).median
    goals.push(
      `lua (replica) ÷ bare = ${n2(m)} (goal ≥ ${GOALS.luaOverBare}): ${m >= GOALS.luaOverBare ? 'met' : 'missed'}`,
    )
  }
  const open = summary.open['lua-replica']
  if (open) {
    const m = spread(open.p99).median
    goals.push(
      `lua (replica) p99 at half its maximum = ${n2(m)} ms (goal ≤ ${GOALS.p99AtHalfMs} ms): ${m <= GOALS.p99AtHalfMs ? 'met' : 'missed'}`,
    )
  }
  if (goals.length > 0) lines.push('', ...goals.map((g) => `- ${g}`))
  return lines.join('\n')
}
