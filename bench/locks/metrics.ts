import type { Library } from './driver.js'
import type { Phase, PhaseResult } from './phases.js'
import { type Spread, spread } from './stats.js'

export interface MetricDef {
  key: string
  label: string
  better: 'higher' | 'lower'
  decimals: number
  /** Summed over rounds instead of a median (event counts such as failures). */
  sum?: boolean
  extract(r: PhaseResult): number
}

const perUnit = (count: (r: PhaseResult) => number, part: (r: PhaseResult) => number) => (r: PhaseResult) =>
  count(r) === 0 ? Number.NaN : part(r) / count(r)

const ops = (r: PhaseResult) => (r.kind === 'uncontended' ? r.result.ops : r.result.totalAcquisitions)
const contended =
  (f: (r: Extract<PhaseResult, { kind: 'contended' }>['result']) => number) => (r: PhaseResult) =>
    r.kind === 'contended' ? f(r.result) : Number.NaN

const UNCONTENDED_METRICS: MetricDef[] = [
  {
    key: 'opsPerSec',
    label: 'ops/s',
    better: 'higher',
    decimals: 0,
    extract: (r) => (r.kind === 'uncontended' ? r.result.opsPerSec : Number.NaN),
  },
  {
    key: 'serverCmdsPerOp',
    label: 'Redis cmds/op',
    better: 'lower',
    decimals: 1,
    extract: perUnit(ops, (r) => r.commands.serverTotal),
  },
  {
    key: 'topLevelPerOp',
    label: 'top-level cmds/op',
    better: 'lower',
    decimals: 1,
    extract: perUnit(ops, (r) => r.commands.topLevel),
  },
  {
    key: 'failures',
    label: 'failures',
    better: 'lower',
    decimals: 0,
    sum: true,
    extract: (r) => r.result.failures,
  },
]

const CONTENDED_METRICS: MetricDef[] = [
  {
    key: 'acquisitionsPerSec',
    label: 'acq/s',
    better: 'higher',
    decimals: 0,
    extract: contended((c) => c.acquisitionsPerSec),
  },
  {
    key: 'waitP50Ms',
    label: 'wait p50 ms',
    better: 'lower',
    decimals: 1,
    extract: contended((c) => c.waitP50Ms),
  },
  {
    key: 'waitP99Ms',
    label: 'wait p99 ms',
    better: 'lower',
    decimals: 1,
    extract: contended((c) => c.waitP99Ms),
  },
  {
    key: 'handoffP50Ms',
    label: 'hand-off p50 ms',
    better: 'lower',
    decimals: 2,
    extract: contended((c) => c.handoffP50Ms),
  },
  {
    key: 'handoffP99Ms',
    label: 'hand-off p99 ms',
    better: 'lower',
    decimals: 2,
    extract: contended((c) => c.handoffP99Ms),
  },
  {
    key: 'serverCmdsPerAcq',
    label: 'Redis cmds/acq',
    better: 'lower',
    decimals: 1,
    extract: perUnit(ops, (r) => r.commands.serverTotal),
  },
  {
    key: 'scriptsPerAcq',
    label: 'EVAL+EVALSHA/acq',
    better: 'lower',
    decimals: 1,
    extract: perUnit(ops, (r) => r.commands.serverScripts),
  },
  {
    key: 'topLevelPerAcq',
    label: 'top-level cmds/acq',
    better: 'lower',
    decimals: 1,
    extract: perUnit(ops, (r) => r.commands.topLevel),
  },
  {
    key: 'failures',
    label: 'failed acq',
    better: 'lower',
    decimals: 0,
    sum: true,
    extract: (r) => r.result.failures,
  },
  {
    key: 'releaseFailures',
    label: 'failed rel',
    better: 'lower',
    decimals: 0,
    sum: true,
    extract: contended((c) => c.releaseFailures),
  },
]

export function metricsFor(phase: Phase): MetricDef[] {
  return phase === 'b-contended' || phase === 'b-isolated' ? CONTENDED_METRICS : UNCONTENDED_METRICS
}

export type PhaseSummary = Partial<Record<Library, Record<string, Spread>>>

export function summarize(phase: Phase, byLibrary: Partial<Record<Library, PhaseResult[]>>): PhaseSummary {
  const summary: PhaseSummary = {}
  for (const [library, results] of Object.entries(byLibrary) as [Library, PhaseResult[]][]) {
    const row: Record<string, Spread> = {}
    for (const m of metricsFor(phase)) {
      const values = results.map(m.extract)
      if (m.sum) {
        const total = values.reduce((a, b) => a + b, 0)
        row[m.key] = { median: total, min: total, max: total }
      } else {
        row[m.key] = spread(values)
      }
    }
    summary[library] = row
  }
  return summary
}
