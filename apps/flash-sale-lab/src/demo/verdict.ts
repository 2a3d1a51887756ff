// The demo's judgement: one summary row per phase (its check, its faults' recovery, the retry
// storm's bound) and the run's verdict over every strategy.
import type { ChaosEvent } from '@kunci/topology'
import type { LoadResult } from '../load/result.js'
import { faultImpacts } from '../report/fault-impact.js'
import type { ReportVerdict, StrategyReport, SummaryRow } from '../report/report-input.js'
import type { PhaseCheck } from './checker.js'
import type { DemoStrategy } from './demo-options.js'
import type { PhasePlan } from './scenario.js'

/** What a summary row needs of a phase's check, plain or money. */
export type PhaseCheckFigures = Pick<
  PhaseCheck,
  'sold' | 'oversold' | 'persisted' | 'duplicates' | 'doubleCharges' | 'violations' | 'notes'
>

/**
 * The retry storm's bound, from the kill -9 to the first second answered without a 5xx: failure
 * detection (cluster-node-timeout 1 s) and promotion take 2–3 s, and issue 13 allows 5 s after
 * the promotion.
 */
const STORM_RECOVERY_S = 10

export function summaryRow(
  strategy: DemoStrategy,
  plan: PhasePlan,
  load: LoadResult,
  events: ChaosEvent[],
  chaosStartedAtMs: number,
  check: PhaseCheckFigures,
  drained: boolean,
): SummaryRow {
  const byStatus: Record<string, number> = { ...load.totals.byStatus }
  const transport = Object.values(load.totals.transportErrors).reduce((a, b) => a + b, 0)
  if (transport > 0) byStatus.transport = transport
  const faults = faultImpacts(load, events, chaosStartedAtMs)
  const recoveries = faults.map((f) => f.recoveryMs)
  const recoveryMs =
    recoveries.length === 0 || recoveries.includes(null) ? null : Math.max(...(recoveries as number[]))
  const stormFailed =
    plan.retryStorm === true && (recoveryMs === null || recoveryMs > STORM_RECOVERY_S * 1_000)
  const violations = stormFailed
    ? [
        ...check.violations,
        `not answered again within ${STORM_RECOVERY_S} s of the master kill while the crowd retried (recovery ${recoveryMs === null ? 'never' : `${(recoveryMs / 1000).toFixed(1)} s`})`,
      ]
    : check.violations
  const broke = violations.length > 0
  const verdict = !broke ? 'pass' : strategy === 'naive' ? 'expected-fail' : 'fail'
  const notes = [...violations, ...check.notes]
  if (!drained) notes.push(`the worker had not settled every order within the drain time-out`)
  if (strategy === 'naive' && !broke && plan.stock > 0) notes.push('naive did not oversell this time')
  return {
    requestsPerSecond: load.totals.requestsPerSecond,
    p50Ms: load.latency.p50Ms,
    p99Ms: load.latency.p99Ms,
    maxMs: load.latency.maxMs,
    byStatus,
    sold: check.sold,
    oversold: check.oversold,
    persisted: check.persisted,
    duplicates: check.duplicates,
    doubleCharges: check.doubleCharges,
    faults,
    recoveryMs,
    verdict,
    notes,
  }
}

export function demoVerdict(strategies: readonly StrategyReport[], aborted: boolean): ReportVerdict {
  const correct = strategies.filter((s) => s.expectedCorrect !== false)
  const broken = correct.filter((s) => s.phases.some((p) => p.summary.verdict === 'fail'))
  const details: string[] = []
  for (const s of broken) {
    for (const p of s.phases.filter((x) => x.summary.verdict === 'fail'))
      details.push(`${s.strategy} ${p.id}: ${(p.summary.notes ?? []).join('; ')}`)
  }
  const naive = strategies.find((s) => s.strategy === 'naive')
  if (naive) {
    const oversold = naive.phases.reduce((a, p) => a + p.summary.oversold, 0)
    details.push(
      oversold > 0
        ? `naive oversold ${oversold} unit(s), as expected: users were told they bought units that do not exist`
        : 'naive did not oversell this time (its race needs contention; it is still wrong)',
    )
  }
  if (aborted) details.unshift('stopped early (Ctrl-C): the figures cover the phases that ran')
  const names = correct.map((s) => s.strategy).join(' and ')
  const phases = strategies[0]?.phases ?? []
  const faults = phases.reduce((a, p) => a + p.faults.length, 0)
  const ok = broken.length === 0 && !aborted && correct.every((s) => s.phases.length > 0)
  // Only what the phases that ran showed (`--phases` may leave out the storm or the money).
  const storm = phases.some((p) => p.id.startsWith('storm-'))
  const money = phases.some((p) => p.money !== undefined)
  const claims = [
    '0 oversold, every 200 persisted, nobody twice, no double charge',
    ...(money
      ? ['the books balanced (stock = sold + remaining, reserved = sold + returned), no balance below 0']
      : []),
    ...(storm ? [`answered again within ${STORM_RECOVERY_S} s of a master kill`] : []),
  ]
  const headline = ok
    ? `${names || 'no correct strategy'} held every invariant under ${faults} faults in ${phases.length} phases${storm ? ' (a retry storm among them)' : ''}: ${claims.join(', ')}`
    : broken.length > 0
      ? `${broken.map((s) => s.strategy).join(' and ')} broke an invariant`
      : 'the run did not finish'
  return { ok, headline, details }
}
