// What one checkout benchmark run does, in one frozen table per mode. The full settings are what
// bench/RESULTS.md reports; --quick is a smoke run of the same code paths (numbers not comparable).

/**
 * `lua-noworker` is lua-replica without the order worker: not a deployment (nothing reaches SQL),
 * a diagnostic that shows how much of the service's throughput the worker's SQL writes, running
 * on the same 2 cores, take away.
 */
export type Target = 'bare' | 'lua-replica' | 'lua-none' | 'lua-noworker' | 'redlock'

export const TARGETS: readonly Target[] = Object.freeze([
  'bare',
  'lua-replica',
  'lua-none',
  'lua-noworker',
  'redlock',
])

/** The lua variant whose maximum sets the open-loop rate ("half of lua's maximum rate"). */
export const RATE_REFERENCE: Target = 'lua-replica'

export interface BenchSettings {
  /** Interleaved rounds (A B C D, A B C D, …); medians are over these. */
  rounds: number
  /** Service processes per target (node:cluster), the bare server included. */
  instances: number
  /** Closed loop: connections, each with one request in flight, no think time. */
  connections: number
  /** Closed loop: seconds ramping up to `connections`, not counted. */
  closedWarmupS: number
  /** Closed loop: measured seconds after the warm-up. */
  closedSeconds: number
  /** Open loop: seconds at the fixed rate before the measured window (not counted). */
  openWarmupS: number
  /** Open loop: measured seconds. */
  openSeconds: number
  /** Open loop: the fixed rate as a share of the target's closed-loop median maximum. */
  openRateShare: number
  /** Open loop: connections available to the fixed-rate sender (more than the rate ever needs in flight). */
  openConnections: number
  /** Stock of the sale: large enough never to sell out during a run. */
  stock: number
  /** Users are drawn from [1, userIdMax]: repeats are rare, and perUserLimit covers them. */
  userIdMax: number
  /** The service's maximum (1000): a repeated user is still answered 200. */
  perUserLimit: number
  /** A stack's worker may take this long to drain the previous run's order events before the next run. */
  drainDeadlineS: number
}

export const FULL_SETTINGS: Readonly<BenchSettings> = Object.freeze({
  rounds: 3,
  instances: 2,
  connections: 64,
  closedWarmupS: 3,
  closedSeconds: 12,
  openWarmupS: 2,
  openSeconds: 12,
  openRateShare: 0.5,
  openConnections: 256,
  stock: 10_000_000,
  userIdMax: 1_000_000_000_000,
  perUserLimit: 1000,
  drainDeadlineS: 120,
})

export const QUICK_SETTINGS: Readonly<BenchSettings> = Object.freeze({
  ...FULL_SETTINGS,
  rounds: 1,
  closedWarmupS: 1,
  closedSeconds: 3,
  openWarmupS: 1,
  openSeconds: 3,
  drainDeadlineS: 30,
})

/** The product every target sells (the source articles' k6 scenario buys product 9921). */
export const PRODUCT_ID = 9921
