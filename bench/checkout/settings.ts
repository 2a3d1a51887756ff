// What one checkout benchmark run does, in one frozen table per mode. The full settings are what
// bench/RESULTS.md reports; --quick is a smoke run of the same code paths (numbers not comparable).

/**
 * `lua-noworker` is lua-replica without the order worker: not a deployment (nothing reaches SQL),
 * a diagnostic that shows how much of the service's throughput the worker's SQL writes, running
 * on the same 2 cores, take away.
 *
 * The sold-out targets (issue 15) are lua-replica stacks whose sale has SOLD_OUT_STOCK units,
 * reset before each of their runs and sold out by the crowd itself during the warm-up, so the
 * measured window is the flood of refusals. `soldout` is the service as deployed (refusals from
 * memory); `soldout-nolocal` has LOCAL_ANSWERS=false (every refusal from reserve.lua), a
 * diagnostic of what the local answers buy; `soldout-keys` is `soldout` with an Idempotency-Key
 * on every request (each refusal is recorded under its key: refuse.lua), as the lab's clients send.
 * `soldout-route` is `soldout` with REFUSAL_LANE=false: the answers from memory through the
 * fastify route instead of the refusal lane (the wrk bench's --route, what the lane buys).
 */
export type Target =
  | 'bare'
  | 'lua-replica'
  | 'lua-none'
  | 'lua-noworker'
  | 'redlock'
  | 'soldout'
  | 'soldout-nolocal'
  | 'soldout-keys'
  | 'soldout-route'

/** The reservation targets (the sale never sells out): issue 6's bench, `--phases reserve`. */
export const RESERVE_TARGETS: readonly Target[] = Object.freeze([
  'bare',
  'lua-replica',
  'lua-none',
  'lua-noworker',
  'redlock',
])

export const SOLD_OUT_TARGETS: readonly Target[] = Object.freeze([
  'soldout',
  'soldout-nolocal',
  'soldout-keys',
  'soldout-route',
])

export const TARGETS: readonly Target[] = Object.freeze([...RESERVE_TARGETS, ...SOLD_OUT_TARGETS])

/** `--phases`: `reserve` runs `--targets`; each sold-out phase is its own target. */
export type Phase = 'reserve' | 'soldout' | 'soldout-nolocal' | 'soldout-keys'
export const PHASES: readonly Phase[] = Object.freeze([
  'reserve',
  'soldout',
  'soldout-nolocal',
  'soldout-keys',
])
export const DEFAULT_PHASES: readonly Phase[] = Object.freeze(['reserve', 'soldout', 'soldout-nolocal'])

export const isSoldOut = (t: Target): boolean => SOLD_OUT_TARGETS.includes(t)

/**
 * What the requests of a run look like. `fresh`: a user drawn from [1, userIdMax] and a fresh
 * Idempotency-Key per request (issue 6's reservations: every answer a sale). `k6`: the source
 * articles' k6 scenario (loadtest/k6/checkout.js): a random user below 100,000, no
 * Idempotency-Key; `k6-keys` adds a fresh key per request.
 */
export type RequestShape = 'fresh' | 'k6' | 'k6-keys'

export function shapeOf(t: Target): RequestShape {
  if (t === 'soldout-keys') return 'k6-keys'
  return isSoldOut(t) ? 'k6' : 'fresh'
}

/** The k6 scenario's users: `Math.floor(Math.random() * 100000)`. */
export const K6_USER_ID_MAX = 99_999

/** The source articles' sale: 100 units, one per user (the service's default per_user_limit). */
export const SOLD_OUT_STOCK = 100
export const SOLD_OUT_PER_USER_LIMIT = 1

/**
 * The targets whose maximum sets an open-loop rate ("half of the maximum rate"); the bare server
 * runs once at each of these rates, as a floor for what HTTP and the generator cost.
 */
export const RATE_REFERENCES: readonly Target[] = Object.freeze(['lua-replica', 'soldout'])

/** The targets measured in the open loop, each at half its own closed-loop median. */
export const OPEN_TARGETS: readonly Target[] = Object.freeze([
  'lua-replica',
  'lua-none',
  'soldout',
  'soldout-nolocal',
  'soldout-keys',
])

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
