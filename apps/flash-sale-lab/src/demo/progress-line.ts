// The demo's live line, once a second: the load's second plus what the sampler and the chaos run
// know at that moment.
import type { LoadSecond } from '../load/result.js'

export interface ProgressState {
  strategy: string
  phase: string
  /** Last sampled units left and reservations not yet in SQL; undefined before the first sample. */
  stockLeft?: number
  pending?: number
  /** Labels of the faults in effect right now. */
  faults: readonly string[]
}

/** 'lua  sale-100   12s  VUs 180   850 req/s  200:3 409:820 503:27  p99 41.2 ms  stock 0  pending 3  fault: kill -9 worker' */
export function formatDemoProgress(state: ProgressState, s: LoadSecond): string {
  const codes = Object.entries(s.byStatus)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([code, n]) => `${code}:${n}`)
  if (s.transportErrors > 0) codes.push(`no-answer:${s.transportErrors}`)
  const p99 = s.p99Ms === null ? '-' : `${s.p99Ms.toFixed(1)} ms`
  const gauge = (v: number | undefined) => (v === undefined ? '?' : String(v))
  const fault = state.faults.length === 0 ? '-' : state.faults.join(' + ')
  return [
    `${state.strategy.padEnd(7)} ${state.phase.padEnd(9)} ${`${s.t}s`.padStart(4)}`,
    `VUs ${String(s.vus).padStart(3)}`,
    `${String(s.requests).padStart(5)} req/s`,
    (codes.join(' ') || '-').padEnd(24),
    `p99 ${p99.padStart(8)}`,
    `stock ${gauge(state.stockLeft).padStart(4)}`,
    `pending ${gauge(state.pending).padStart(3)}`,
    `fault: ${fault}`,
  ].join('  ')
}
