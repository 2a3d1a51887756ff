// What each fault cost, read off a load run's per-second series, for SummaryRow.faults.
// Resolution is one second: a request counts in the second its answer arrived (see result.ts).
import type { ChaosEvent } from '@kunci/topology'
import type { LoadResult } from '../load/result.js'
import type { FaultImpact } from './report-input.js'

const isFailure = (status: string) => status.startsWith('5')

/**
 * failed/total: requests answered 5xx or not at all, of all, in the seconds overlapping the
 * fault's window (start to end, undo included). recoveryMs: from the fault's start to the start
 * of the first second after it with answers and no failure; 0 if the fault caused none.
 */
export function faultImpacts(
  load: Pick<LoadResult, 'series' | 'startedAtMs' | 'durationMs'>,
  events: readonly ChaosEvent[],
  chaosStartedAtMs = load.startedAtMs,
): FaultImpact[] {
  const s = load.series
  const offset = chaosStartedAtMs - load.startedAtMs
  const failedAt = (i: number) =>
    s.transportErrors[i]! +
    Object.entries(s.byStatus).reduce((a, [code, col]) => a + (isFailure(code) ? col[i]! : 0), 0)
  return events.map((e) => {
    const startMs = offset + e.startedMs
    const endMs = offset + (e.endedMs ?? load.durationMs)
    let failed = 0
    let total = 0
    let recoveryMs: number | null = null
    let sawFailure = false
    for (let i = 0; i < s.t.length; i++) {
      const from = (s.t[i]! - 1) * 1000
      const to = s.t[i]! * 1000
      if (to <= startMs) continue
      const f = failedAt(i)
      if (from <= endMs) {
        failed += f
        total += s.requests[i]! + s.transportErrors[i]!
      }
      if (f > 0) sawFailure = true
      else if (recoveryMs === null && s.requests[i]! > 0 && (sawFailure || from >= endMs)) {
        recoveryMs = sawFailure ? Math.max(0, from - startMs) : 0
      }
      if (recoveryMs !== null && from > endMs) break
    }
    // Requests all through the fault and not one failed: it cost nothing, even if the load ended
    // before the fault did (a master left dead until the end of the phase).
    if (recoveryMs === null && !sawFailure && total > 0) recoveryMs = 0
    return { label: e.label, failed, total, recoveryMs }
  })
}
