import type { HistoryVerdict } from './history.js'
import type { QuarantineOutcome } from './quarantine-scenario.js'
import type { StaleHolderOutcome } from './stale-holder.js'
import type { StoreSnapshot } from './store.js'
import type { WorkerStats } from './workers.js'

export interface RunResults {
  readonly unlocked: StoreSnapshot
  readonly locked: StoreSnapshot
  readonly holds: number
  readonly verdict: HistoryVerdict
  readonly stats: WorkerStats
  readonly contention: number
  readonly nodeErrors: number
  readonly quarantines: number
  readonly faults: readonly string[]
  readonly stale: StaleHolderOutcome | undefined
  readonly scenario: QuarantineOutcome
  readonly elapsedMs: number
}

/** Fewer holds than this in the faulty run means the lock stopped making progress. */
const MIN_HOLDS = 50

/** Prints the final report; returns the exit code (1 if an invariant failed). */
export function printReport(r: RunResults): number {
  const violations: string[] = []
  const notes: string[] = []
  const lostUnlocked = r.unlocked.writes - r.unlocked.balance
  const lostLocked = r.locked.writes - r.locked.balance
  if (lostLocked !== 0) violations.push(`${lostLocked} lost updates with the lock`)
  if (r.locked.fence !== r.locked.highestApplied)
    violations.push(
      `the store's fence is ${r.locked.fence}, below the highest applied (${r.locked.highestApplied}): a lower fence wrote last`,
    )
  if (r.verdict.overlaps.length > 0) violations.push(`${r.verdict.overlaps.length} overlapping holds`)
  if (r.verdict.fenceInversions.length > 0)
    violations.push(`${r.verdict.fenceInversions.length} successive holds whose fence did not increase`)
  if (r.stats.rejectedWhileValid > 0)
    violations.push(`${r.stats.rejectedWhileValid} fenced writes refused while their lock was still valid`)
  for (const e of r.stats.unexpected) violations.push(`worker error: ${e.message}`)
  if (r.holds < MIN_HOLDS) violations.push(`only ${r.holds} holds: the lock stopped making progress`)
  violations.push(...r.scenario.violations)
  if (lostUnlocked === 0)
    notes.push('no update was lost without the lock: suspicious, the machine may be idle')

  const pct = (a: number, b: number) => (b === 0 ? 0 : Math.round((100 * a) / b))
  const failures = [...r.stats.failures].map(([code, n]) => `${code} ×${n}`).join(', ') || 'none'
  const lines = [
    '',
    '── report ──',
    `without the lock : ${r.unlocked.writes} writes, balance ${r.unlocked.balance} → ${lostUnlocked} lost updates (${pct(lostUnlocked, r.unlocked.writes)}%)`,
    `with the lock    : ${r.holds} holds, ${r.locked.writes} writes applied, balance ${r.locked.balance} → ${lostLocked} lost updates`,
    `  contention     : ${r.contention} attempts found the lock held by another pod (kunci:lock:contention)`,
    `  acquire errors : ${failures} (contention and outage are different errors)`,
    `  node failures  : ${r.nodeErrors} per-node errors or time-outs during acquires (kunci:lock:node-error)`,
    `  skipped writes : ${r.stats.skipped} (lock too close to its end to write safely)`,
    `  history check  : ${r.verdict.overlaps.length} overlapping holds, ${r.verdict.fenceInversions.length} fence inversions in ${r.holds} holds`,
    `  store check    : fence ${r.locked.fence} stored, highest applied ${r.locked.highestApplied}${r.locked.fence === r.locked.highestApplied ? '' : ' (A LOWER FENCE WROTE LAST)'}`,
    r.stale
      ? `  stale holder   : late write ${r.stale.writeRejected ? 'rejected by the fence' : 'applied (nobody wrote in between)'}, release → ${r.stale.releaseCode ?? 'ok'}`
      : '  stale holder   : did not run',
    `faults injected  : ${r.faults.length}; restart quarantines started: ${r.quarantines} (kunci:lock:quarantined)`,
    ...r.faults.map((f) => `  - ${f}`),
    `quarantine check : quarantine on → ${r.scenario.safePodRefused ? 'refused' : 'GRANTED'}; quarantine off → ${r.scenario.unsafeDoubleGrant ? 'double grant' : 'no double grant this time'}` +
      (r.scenario.staleWriteRejected === undefined
        ? ''
        : `; fence ${r.scenario.staleWriteRejected ? 'rejected' : 'did NOT reject'} the stale write`),
    `violations       : ${violations.length === 0 ? '0 with the lock' : violations.length}`,
    ...violations.map((v) => `  ✗ ${v}`),
    ...notes.map((n) => `note: ${n}`),
    `finished in ${(r.elapsedMs / 1000).toFixed(1)} s: ${violations.length === 0 ? 'all invariants hold' : 'INVARIANT FAILED'}`,
  ]
  console.log(lines.join('\n'))
  return violations.length === 0 ? 0 : 1
}
