// The markdown tables of one run (printed at the end; bench/RESULTS.md quotes them).
import { spread } from '../locks/stats.js'
import type { ClosedLoopSample } from './closed-loop.js'
import type { CommandCounts, CommandDelta } from './commandstats.js'
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
  /** Cores used during the measured window (after the warm-up), by who used them. */
  cpu: CpuShare
  /** The target cluster's Redis commands during the measured window (none for bare). */
  commands: CommandDelta | undefined
  sample: ClosedLoopSample
}

export interface OpenRun {
  round: number
  target: Target
  /** The target, or `bare@<reference>` for the bare server at that reference's rate. */
  label: string
  loadAverage1m: number
  backlogAtStart: number
  cpu: CpuShare
  commands: CommandDelta | undefined
  sample: OpenLoopSample
}

/**
 * The issues' targets. Issue 6: lua ≥ 0.6× bare requests/s; p99 ≤ 5 ms at half of lua's maximum
 * rate. Issue 15: the sold-out flood ≥ 0.9× bare requests/s with a p99 ≤ 1.5× bare's, and p99 ≤
 * 5 ms at half its maximum rate.
 */
export const GOALS = Object.freeze({
  luaOverBare: 0.6,
  p99AtHalfMs: 5,
  soldOutOverBare: 0.9,
  soldOutP99OverBare: 1.5,
})

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

/** Per-request costs of one run: Redis commands (masters, replicas) and CPU µs by process. */
interface Costs {
  /** Redis commands per request on the masters; NaN without a cluster (bare). */
  mastersPerRequest: number
  replicasPerRequest: number
  /** The masters' commands per request, by command. */
  byCommand: CommandCounts
  serviceUs: number
  redisUs: number
}

function costs(cpu: CpuShare, commands: CommandDelta | undefined, requests: number, seconds: number): Costs {
  const n = Math.max(1, requests)
  const byCommand: CommandCounts = {}
  for (const [k, v] of Object.entries(commands?.masters ?? {})) byCommand[k] = v / n
  // cpu is in cores over the window; requests/seconds is the window's rate.
  const usPerRequest = (cores: number | undefined) => ((cores ?? 0) * 1e6 * seconds) / n
  return {
    mastersPerRequest: commands ? commands.mastersTotal / n : Number.NaN,
    replicasPerRequest: commands ? commands.replicasTotal / n : Number.NaN,
    byCommand,
    serviceUs: usPerRequest(cpu.service),
    redisUs: usPerRequest(cpu.redis),
  }
}

export interface ClosedSummary {
  rps: number[]
  sales: number[]
  p50: number[]
  p99: number[]
  mix: string
  cpu: CpuShare[]
  costs: Costs[]
}

export interface OpenSummary {
  rate: number
  p50: number[]
  p99: number[]
  p999: number[]
  lagP99: number[]
  mix: string
  costs: Costs[]
}

export interface Summary {
  closed: Record<string, ClosedSummary>
  /** target ÷ bare requests/s, paired within each round. */
  ratios: Record<string, number[]>
  /** target's p99 ÷ bare's p99, paired within each round. */
  p99Ratios: Record<string, number[]>
  /** By label: the target, or bare@<reference>. */
  open: Record<string, OpenSummary>
}

export function summarize(closed: ClosedRun[], open: OpenRun[]): Summary {
  const summary: Summary = { closed: {}, ratios: {}, p99Ratios: {}, open: {} }
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
      costs: runs.map((r) => costs(r.cpu, r.commands, r.sample.measuredRequests, r.sample.measuredSeconds)),
    }
    if (t === 'bare' || !targets.includes('bare')) continue
    const paired = runs.flatMap((r) => {
      const bare = closed.find((c) => c.target === 'bare' && c.round === r.round)
      return bare ? [{ r, bare }] : []
    })
    summary.ratios[t] = paired.map(
      ({ r, bare }) => r.sample.requestsPerSecond / bare.sample.requestsPerSecond,
    )
    summary.p99Ratios[t] = paired.map(({ r, bare }) => r.sample.latency.p99Ms / bare.sample.latency.p99Ms)
  }
  for (const label of [...new Set(open.map((o) => o.label))]) {
    const runs = open.filter((o) => o.label === label)
    summary.open[label] = {
      rate: runs[0]!.sample.rate,
      p50: runs.map((r) => r.sample.latency.p50Ms),
      p99: runs.map((r) => r.sample.latency.p99Ms),
      p999: runs.map((r) => r.sample.latency.p999Ms),
      lagP99: runs.map((r) => r.sample.sendLag.p99Ms),
      mix: codeMix(runs.map((r) => r.sample)),
      costs: runs.map((r) =>
        costs(r.cpu, r.commands, r.sample.scheduled, r.sample.scheduled / r.sample.rate),
      ),
    }
  }
  return summary
}

/** 'evalsha 1.00, publish 0.01': the masters' commands per request, medians, most first. */
function commandMix(runs: Costs[]): string {
  const names = [...new Set(runs.flatMap((c) => Object.keys(c.byCommand)))]
  const med = names
    .map((k) => [k, spread(runs.map((c) => c.byCommand[k] ?? 0)).median] as const)
    .filter(([, v]) => v >= 0.0005)
    .sort((a, b) => b[1] - a[1])
  return med.length === 0
    ? '–'
    : med.map(([k, v]) => `${k} ${v < 0.01 ? v.toFixed(4) : v.toFixed(2)}`).join(', ')
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
    '| target | requests/s | sales (200/202)/s | ÷ bare (paired per round) | p50 ms | p99 ms | p99 ÷ bare p99 | Redis cmds/request (masters + replicas) | service CPU µs/request | answers |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  )
  const cmds = (c: Costs[]) => {
    const m = spread(c.map((x) => x.mastersPerRequest)).median
    const r = spread(c.map((x) => x.replicasPerRequest)).median
    return Number.isFinite(m) ? `${n2(m)} + ${n2(r)}` : '–'
  }
  const serviceUs = (c: Costs[]) =>
    range(
      c.map((x) => x.serviceUs),
      n0,
    )
  for (const [t, c] of Object.entries(summary.closed)) {
    const ratio = summary.ratios[t]
    const p99Ratio = summary.p99Ratios[t]
    const one = t === 'bare' ? '1' : '–'
    lines.push(
      `| ${t} | ${range(c.rps, n0)} | ${range(c.sales, n0)} | ${ratio ? range(ratio, n2) : one} | ${range(c.p50, n2)} | ${range(c.p99, n2)} | ${p99Ratio ? range(p99Ratio, n2) : one} | ${cmds(c.costs)} | ${serviceUs(c.costs)} | ${c.mix} |`,
    )
  }
  const categories: CpuCategory[] = ['loadgen', 'service', 'worker', 'redis', 'postgres', 'host', 'other']
  lines.push(
    '',
    'Where the cores went during the closed-loop runs\' measured windows (CPU seconds per second, medians; "other" is everything else on the machine, i.e. other users):',
    '',
    `| target | ${categories.join(' | ')} | total | service CPU µs/request | Redis CPU µs/request |`,
    `|---|${categories.map(() => '---:').join('|')}|---:|---:|---:|`,
  )
  for (const [t, c] of Object.entries(summary.closed)) {
    const med = (k: CpuCategory) => spread(c.cpu.map((x) => x[k] ?? 0)).median
    const total = spread(c.cpu.map((x) => Object.values(x).reduce((a, b) => a + b, 0))).median
    const redisUs = spread(c.costs.map((x) => x.redisUs)).median
    lines.push(
      `| ${t} | ${categories.map((k) => n2(med(k))).join(' | ')} | ${n2(total)} | ${n0(spread(c.costs.map((x) => x.serviceUs)).median)} | ${t === 'bare' ? '–' : n0(redisUs)} |`,
    )
  }
  const withCommands = Object.entries(summary.closed).filter(([t]) => t !== 'bare')
  if (withCommands.length > 0) {
    lines.push(
      '',
      "Redis commands per request on the cluster's masters, by command (INFO commandstats over the measured window, medians):",
      '',
      '| target | commands per request |',
      '|---|---|',
      ...withCommands.map(([t, c]) => `| ${t} | ${commandMix(c.costs)} |`),
    )
  }
  if (Object.keys(summary.open).length > 0) {
    lines.push(
      '',
      `Open loop: a fixed rate of ${settings.openRateShare} × the target's closed-loop median, latency from each request's scheduled time (no coordinated omission), ${settings.openSeconds} s measured after ${settings.openWarmupS} s.`,
      '',
      '| target | rate/s | p50 ms | p99 ms | p99.9 ms | send lag p99 ms | Redis cmds/request | service CPU µs/request | answers |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---|',
    )
    for (const [t, o] of Object.entries(summary.open)) {
      lines.push(
        `| ${t} | ${n0(o.rate)} | ${range(o.p50, n2)} | ${range(o.p99, n2)} | ${range(o.p999, n2)} | ${range(o.lagP99, n2)} | ${cmds(o.costs)} | ${serviceUs(o.costs)} | ${o.mix} |`,
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
  const soldOut = summary.ratios.soldout
  if (soldOut) {
    const m = spread(soldOut).median
    goals.push(
      `sold out ÷ bare = ${n2(m)} (goal ≥ ${GOALS.soldOutOverBare}): ${m >= GOALS.soldOutOverBare ? 'met' : 'missed'}`,
    )
    const p = spread(summary.p99Ratios.soldout ?? []).median
    goals.push(
      `sold out p99 ÷ bare p99 = ${n2(p)} (goal ≤ ${GOALS.soldOutP99OverBare}): ${p <= GOALS.soldOutP99OverBare ? 'met' : 'missed'}`,
    )
  }
  const openSoldOut = summary.open.soldout
  if (openSoldOut) {
    const m = spread(openSoldOut.p99).median
    goals.push(
      `sold out p99 at half its maximum = ${n2(m)} ms (goal ≤ ${GOALS.p99AtHalfMs} ms): ${m <= GOALS.p99AtHalfMs ? 'met' : 'missed'}`,
    )
  }
  if (goals.length > 0) lines.push('', ...goals.map((g) => `- ${g}`))
  return lines.join('\n')
}
