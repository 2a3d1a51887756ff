// What the HTML report shows, as plain JSON: the demo builds one ReportInput per run and
// renderReport turns it into a self-contained page. `version` changes when a field changes
// meaning or goes away (additions keep it).
//
// Time axes: every `t` is in seconds since the phase's load run started (LoadResult.startedAtMs).
// Fault events come from runChaos as they are (ms since the chaos run's origin); give the phase
// `chaosStartedAtMs` (the `startedAt` passed to runChaos) and the report shifts them onto the
// load's axis. Without it, chaos and load are taken to have started together.
import type { ChaosEvent } from '@kunci/topology'
import type { CrowdFigures } from '../load/crowd-figures.js'
import type { LoadResult, PaymentOutcome } from '../load/result.js'

export const REPORT_INPUT_VERSION = 1

/** One sample of a gauge (stock left, queue pending) at `t` seconds since the load started. */
export interface Sample {
  t: number
  value: number
}

/** Requests that failed while one fault was in effect (its window plus recovery). */
export interface FaultImpact {
  /** The fault's label, as in its ChaosEvent. */
  label: string
  /** Requests answered 5xx or with a transport error during the window. */
  failed: number
  /** All requests sent during the window. */
  total: number
  /** From the fault's start until requests succeed again; null: never within the run. */
  recoveryMs: number | null
}

/**
 * The figures of one phase of one strategy: the table row. `oversold`, `duplicates` and
 * `doubleCharges` are the invariants: 0 for a correct strategy.
 */
export interface SummaryRow {
  requestsPerSecond: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** HTTP status → count, plus 'transport' for requests that got no answer. */
  byStatus: Record<string, number>
  /** Units the service confirmed (200/202). */
  sold: number
  /** Confirmed beyond the stock: sold - stock when positive. */
  oversold: number
  /** Orders found in the database at the end. */
  persisted: number
  /** Orders for the same user and product beyond the first. */
  duplicates: number
  /** Payments charged twice for one order (an idempotency failure). */
  doubleCharges: number
  faults: FaultImpact[]
  /** Longest recovery over the phase's faults; null: no fault or never recovered. */
  recoveryMs: number | null
  /** 'pass': invariants held; 'fail': one broke; 'expected-fail': broke, as the strategy is meant to (naive). */
  verdict: 'pass' | 'fail' | 'expected-fail'
  /** Why, in a few words ('oversold 37 units', 'persisted = sold'). */
  notes?: string[]
}

export interface PhaseReport {
  /** Stable id, e.g. 'sale-100'. */
  id: string
  /** Shown as the heading, e.g. '100 units, 2 min'. */
  label: string
  /** Units on sale at the start. */
  stock: number
  /** The phase's load run; only series, startedAtMs, durationMs and latency are read. */
  load: Pick<LoadResult, 'series' | 'startedAtMs' | 'durationMs' | 'latency'>
  stockRemaining: Sample[]
  queuePending: Sample[]
  faults: ChaosEvent[]
  /** runChaos's `startedAt` (epoch ms), to place the faults; @defaultValue load.startedAtMs */
  chaosStartedAtMs?: number
  summary: SummaryRow
  /** A crowd phase's users (see RoomComparison). */
  crowd?: CrowdRun
  /** A money phase's books (issue 16): absent in the other phases and in older reports. */
  money?: MoneyFigures
}

/**
 * The books of one sale of a money phase once drained (docs/flash-sale.md, "Money and the life of
 * an order"). Counts of the sale's current round; amounts in currency units.
 */
export interface MoneyFigures {
  payment: 'instant' | 'hold'
  holdSeconds?: number
  price: number
  /** stock_total. */
  stock: number
  /** Units ever reserved: orders that held a unit, whether they kept it or gave it back. */
  reserved: number
  /** sales.sold: units held by orders (confirmed + reserved + paid). */
  sold: number
  /** Orders paid: confirmed (instant) + paid (hold). */
  paid: number
  /** Orders still reserved (hold; 0 once every pay_by has passed). */
  held: number
  /** Orders failed INSUFFICIENT_FUNDS by the worker (their units returned). */
  failedFunds: number
  /** Other failures by reason (duplicate_unit returns its unit; sold_out_in_sql, stale_round do not). */
  failedOther: Record<string, number>
  /** Checkouts answered 402 INSUFFICIENT_FUNDS (redlock charges at the checkout: no unit taken). */
  checkoutRefusedFunds: number
  cancelled: number
  expired: number
  /** sales.returned: units given back to the sale this round (a unit can come back more than once). */
  returned: number
  /** Returns SQL gave up and Redis has not taken back yet (0 once drained). */
  pendingReturns: number
  /** The stock in Redis at the end; null if it could not be read. */
  remaining: number | null
  /** Users funded for the phase (PUT /admin/wallets). */
  users: number
  /** Over those users' wallets at the end. */
  balances: { sum: number; min: number; funded: number; charged: number }
  /** What the users did with their reserved orders (hold). */
  payments: Partial<Record<PaymentOutcome, number>>
  /** stock = sold + remaining + pending. */
  stockBalanced: boolean
  /** reserved = sold + returned + pending. */
  returnsBalanced: boolean
}

/** One crowd phase (runLoad's crowd modes): its users' figures. */
export interface CrowdRun {
  /** The phase it was, e.g. 'crowd-direct'. */
  phase: string
  mode: 'crowd' | 'waiting-room'
  /** With the room: its settings as the admin answer repeated them (defaults filled in). */
  settings?: Record<string, number>
  figures: CrowdFigures
  /** Requests sent by kind: checkout, join, poll. */
  requestsByOp: Record<string, number>
  /** When the sale opened, ms after the phase's load started. */
  opensAtMs: number
  p99Ms: number
}

/**
 * The same crowd (users, arrivals, stock) without and with the sale's waiting room; or why the
 * comparison did not run (`skipped`: redlock, whose sales cannot have a room).
 */
export type RoomComparison =
  | {
      stock: number
      users: number
      direct: CrowdRun
      room: CrowdRun
    }
  | { skipped: string }

export interface StrategyReport {
  /** 'naive' | 'redlock' | 'lua'. */
  strategy: string
  /** One line: how it reserves stock. */
  description?: string
  /** Whether the strategy is meant to hold the invariants (naive is not). @defaultValue true */
  expectedCorrect?: boolean
  phases: PhaseReport[]
  /** The waiting room against the plain crowd (issue 17); absent in reports made before it. */
  roomComparison?: RoomComparison
  /** Money phases the service refused to run for this strategy (its 400, as answered). */
  moneySkipped?: { phase: string; reason: string }[]
}

export interface ReportVerdict {
  ok: boolean
  headline: string
  details?: string[]
}

export interface ReportInput {
  version: typeof REPORT_INPUT_VERSION
  /** @defaultValue 'Flash sale under load and chaos' */
  title?: string
  /** ISO time of the run. */
  generatedAt: string
  /** Shown as chips under the title: commit, Node and Redis versions, profile, CPUs... */
  meta?: Record<string, string>
  verdict: ReportVerdict
  strategies: StrategyReport[]
}
