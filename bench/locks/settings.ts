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
 * Retry behaviour for the contended phase, applied to every library as closely as its API
 * allows (see RETRY_MAPPING in RESULTS.md). Mean delay ≈ delayMs in every library; the budget
 * (count × delay ≈ 20 s) is far above any wait we observed, so a failure is a library failing,
 * not the benchmark giving up.
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
  uncontendedMs: 1_500,
  contendedMs: 3_000,
  singleNodeMs: 1_500,
  warmupMs: 300,
  settleMs: 150,
  retry: { delayMs: 5, jitterMs: 5, count: 4_000 },
} satisfies BenchSettings)

export const QUICK_SETTINGS = Object.freeze({
  ...FULL_SETTINGS,
  rounds: 3,
  uncontendedMs: 500,
  contendedMs: 1_200,
  singleNodeMs: 500,
  warmupMs: 150,
  settleMs: 100,
} satisfies BenchSettings)
