// The load run's result: plain JSON (`flash-sale-lab load --json out.json`), read by the HTML report.
//
// `version` changes whenever a field changes meaning or goes away (additions keep it):
//   1: this layout (later additions: `users`, `totals.byOp`, `series.byOp` and the crowd
//      options, for the crowd and waiting-room modes).
// Time series are columnar (one array per measure, index = second of the run) because that is
// what uPlot plots and it keeps a 2-minute run's JSON small. A request is counted in the second
// its answer (or transport error) arrived, and its latency is measured from just before it was
// sent to the end of its body.
import type { LatencySummary } from './latency.js'
import type { ResolvedLoadOptions } from './load-options.js'

export const LOAD_RESULT_VERSION = 1

export interface LoadSeries {
  /** Seconds since the start: 1 for the first second (the end of its window), 2, ... */
  t: number[]
  /** Running VUs at the end of each second. */
  vus: number[]
  /** HTTP answers per second, all statuses. */
  requests: number[]
  /** HTTP answers per second by status code ('200', '409', '429', '503', ...). */
  byStatus: Record<string, number[]>
  /** Requests per second that got no HTTP answer (refused, reset, timeout). */
  transportErrors: number[]
  /** Latency of that second's HTTP answers; null when it had none. */
  p50Ms: (number | null)[]
  p99Ms: (number | null)[]
  maxMs: (number | null)[]
  /** HTTP answers per second by request kind: 'checkout', and with a room 'join' and 'poll'. */
  byOp?: Record<string, number[]>
}

/**
 * The requests a virtual user sends: checkouts, with a waiting room its joins and polls, and with
 * `afterReserved` (a sale paid later) its pays and cancels.
 */
export type LoadOp = 'checkout' | 'join' | 'poll' | 'pay' | 'cancel'

/**
 * How a user of a crowd run ended:
 * - 'purchased': a checkout answered 200/202 (or the room said `closed`, reason `purchased`), or
 *   409 ALREADY_PURCHASED naming the user's own order (`reason` 'already_purchased': one of the
 *   user's requests reserved and its answer was not the one counted, e.g. a double click's other
 *   request);
 * - 'sold_out': 409 SOLD_OUT, or the room's status `sold_out`;
 * - 'insufficient_funds': 402 INSUFFICIENT_FUNDS at the checkout (redlock charges there);
 * - 'already_purchased': 409 ALREADY_PURCHASED without an order id (the service always names one);
 * - 'closed': the sale ended, or the room closed the place (`reason`: sale_ended, dropped, admission_expired);
 * - 'gave_up': still refused (429/503/no answer, or not admitted) after patienceMs or maxRetries;
 * - 'error': an answer no user can act on (`reason`: its error code, e.g. NO_WAITING_ROOM, INVALID_TICKET);
 * - 'stopped': the run ended (its cap, or the caller's signal) first.
 */
export type LoadUserOutcome =
  | 'purchased'
  | 'sold_out'
  | 'insufficient_funds'
  | 'already_purchased'
  | 'closed'
  | 'gave_up'
  | 'error'
  | 'stopped'

/** One user of a crowd run (modes 'crowd' and 'waiting-room'). Times in ms since the run's start. */
export interface LoadUser {
  user_id: number
  /** When its first request was sent: the join with a room, else the first checkout. */
  arrivedMs: number
  /** 'waiting-room': when an answer first said `admitted`; null if none did. */
  admittedMs: number | null
  /** 'waiting-room': the place in line the join answered (1 = next); null otherwise. */
  position: number | null
  /**
   * 'waiting-room': where the service put the user in its line, as its ticket names it (join time
   * in µs, or the draw's rank; smaller = earlier), decimal; null otherwise. This is the order the
   * room admits in. `arrivedMs` is the order the load generator sent the joins in, which a busy
   * machine scrambles by the time the joins reach the two instances.
   */
  lineKey: string | null
  outcome: LoadUserOutcome
  /** When the answer that decided the outcome arrived (for 'stopped': the end of the run). */
  outcomeMs: number
  /** The error code, the room's reason, or what a user who gave up was last answered. */
  reason: string | null
  order_id: string | null
  /** Requests sent for this user: joins, polls, checkouts, pays, cancels, retries and double clicks. */
  requests: number
  /** With `afterReserved`, what the user did with a `reserved` order (see PaymentOutcome). */
  payment?: PaymentOutcome
  /** The last answer's code of a payment that did not end `paid`, `cancelled` or `left`. */
  paymentReason?: string | null
}

/**
 * What a user of a sale paid later did with its reserved order (`afterReserved`):
 * - 'paid': POST /v1/orders/:id/pay answered 200;
 * - 'cancelled': POST /v1/orders/:id/cancel answered 200;
 * - 'left': neither, on purpose: the order expires at its `pay_by`;
 * - 'insufficient_funds': pay answered 402 (the user does not top up: the order expires);
 * - 'not_payable': pay or cancel answered 409 ORDER_NOT_PAYABLE (e.g. it had expired already);
 * - 'gave_up': still ORDER_PENDING, 503 or no answer after patienceMs;
 * - 'error': any other answer (its code in `paymentReason`).
 */
export type PaymentOutcome =
  | 'paid'
  | 'cancelled'
  | 'left'
  | 'insufficient_funds'
  | 'not_payable'
  | 'gave_up'
  | 'error'

export interface LoadOrder {
  order_id: string
  user_id: number
  status: number
}

export interface LoadTotals {
  /** Requests sent, double clicks and retries included. */
  requests: number
  /** Requests that got an HTTP answer. */
  answered: number
  byStatus: Record<string, number>
  /** `error.code` of non-2xx JSON answers (SOLD_OUT, ALREADY_PURCHASED, BUSY, ...). */
  byErrorCode: Record<string, number>
  /** By kind: 'refused', 'reset', 'timeout', 'aborted', 'other'. */
  transportErrors: Record<string, number>
  /** Purchases (a user's attempt, with its retries and double click). */
  purchases: number
  doubleClicks: number
  retries: number
  /** Requests sent by kind (see LoadOp). */
  byOp: Record<string, number>
  /** HTTP answers per second over the whole run. */
  requestsPerSecond: number
}

export interface LoadResult {
  version: typeof LOAD_RESULT_VERSION
  /** ISO time and epoch ms of the start, to line other samples (chaos events, stock) up with `series.t`. */
  startedAt: string
  startedAtMs: number
  durationMs: number
  /** 'completed': the stages ran out; 'cap': maxDurationMs; 'aborted': the caller's signal. */
  stopReason: 'completed' | 'cap' | 'aborted'
  /** As resolved; Infinity is written as null (JSON has no Infinity). */
  options: Omit<ResolvedLoadOptions, 'maxDurationMs' | 'maxRetries'> & {
    maxDurationMs: number | null
    maxRetries: number | null
  }
  totals: LoadTotals
  /** Over every HTTP answer of the run: exact nearest-rank percentiles (see latency.ts). */
  latency: LatencySummary
  series: LoadSeries
  /** Successful (200/202) answers, in arrival order; the same order id twice is a double click's echo. */
  orders: LoadOrder[]
  /** The first few transport error messages, for diagnosis. */
  transportErrorSamples: string[]
  /** Crowd modes: every user, in arrival order; empty in 'purchases' mode. */
  users: LoadUser[]
}

/** What onSecond receives once per second: that second and the running totals. */
export interface LoadSecond {
  t: number
  vus: number
  requests: number
  byStatus: Record<string, number>
  transportErrors: number
  p50Ms: number | null
  p99Ms: number | null
  maxMs: number | null
  totals: Readonly<LoadTotals>
}
