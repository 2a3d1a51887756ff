/**
 * Every knob of the lock benchmark in one table, so RESULTS.md can quote it and a rerun with
 * the same flags measures the same thing.
 */

export interface PhaseDurations {
  /** (a) uncontended acquire+release, per library, per concurrency level, per round. */
  uncontendedMs: number
  /** (b) 32 workers on one key, per library, per round. */
  contendedMs: number
  /** (c) single-node uncontended at concurrency 64, per library, per round. */
  singleNodeMs: number
  /** Untimed run of the same workload before every timed one (JIT, script cache, sockets). */
  warmupMs: number
  /** Pause between timed phases so the previous library's tail (timers, replies) is gone. */
  settleMs: number
}

export interface BenchSettings extends PhaseDurations {
  rounds: number
  nodeCount: number
  /** Lock TTL for every library; long enough never to expire during a ~1 ms hold. */
  ttlMs: number
  uncontendedConcurrency: readonly number[]
  singleNodeConcurrency: number
  contendedWorkers: number
  /** How long a contended worker holds the lock before releasing it. */
  holdMs: number
  retry: RetrySettings
}

/**
 * Retry behaviour, applied to every library as closely as its API allows (bench/RESULTS.md has
 * the mapping). The budget, count × delayMs ≥ 4 s plus the attempts' own time, is above the
 * longest wait any library needed in (b) (2.7 s in the recorded run); it also bounds how long the
 * last waiters of a contended phase can take to drain, which is what keeps a library that
 * livelocks from stretching the run by tens of seconds.
 */
export interface RetrySettings {
  delayMs: number
  /** ± for node-redlock/sesamecare, [0, jitter) added for kunci; redlock-universal and
   * redis-semaphore have no jitter option and retry every delayMs. */
  jitterMs: number
  count: number
}

export const FULL_SETTINGS = Object.freeze({
  rounds: 5,
  nodeCount: 5,
  ttlMs: 10_000,
  uncontendedConcurrency: [1, 64],
  singleNodeConcurrency: 64,
  contendedWorkers: 32,
  holdMs: 1,
  uncontendedMs: 1_200,
  contendedMs: 2_500,
  singleNodeMs: 1_200,
  warmupMs: 300,
  settleMs: 150,
  retry: { delayMs: 5, jitterMs: 5, count: 800 },
} satisfies BenchSettings)

/** A smoke run of the phases with targets; (b') is left out, its drain alone can take seconds. */
export const QUICK_SETTINGS = Object.freeze({
  ...FULL_SETTINGS,
  rounds: 3,
  uncontendedMs: 400,
  contendedMs: 800,
  singleNodeMs: 400,
  warmupMs: 100,
  settleMs: 80,
} satisfies BenchSettings)

export const QUICK_PHASES = ['a-c1', 'a-c64', 'b-contended', 'c-single-c64'] as const
