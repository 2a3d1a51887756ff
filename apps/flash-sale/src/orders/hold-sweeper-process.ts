import { RedisLock } from 'kunci'
import type { HoldSweepSettings } from '../config.js'
import type { Db } from '../db/database.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import type { RedisClient } from '../redis/connect.js'
import { DEFAULT_HOLD_SWEEPER, HoldSweeper } from './hold-sweeper.js'
import type { UnitReturns } from './unit-returns.js'

/**
 * The expiry sweeper inside `flash-sale worker` (every worker runs one; kunci's lock picks the
 * one that sweeps a sale), tuned by the HOLD_SWEEP_* settings (config.ts).
 */
export function startHoldSweeper(deps: {
  redis: RedisClient
  db: Db
  /** The worker's one return path (with its replica confirmations and metrics). */
  returns: UnitReturns
  metrics: ServiceMetrics
  /** config.holdSweep (HOLD_SWEEP_*); unset values take the sweeper's defaults. */
  settings: HoldSweepSettings
  log: (line: string) => void
}): { stop(): Promise<void> } {
  const { redis, db, returns, metrics, settings, log } = deps
  const lockTtlMs = settings.lockTtlMs ?? DEFAULT_HOLD_SWEEPER.lockTtlMs
  const locks = new RedisLock({
    client: redis,
    ttlMs: lockTtlMs,
    // The restart quarantine (standalone Redis) lasts maxTtlMs: no longer than this lock needs.
    maxTtlMs: lockTtlMs,
    nodeTimeoutMs: 500,
    persistence: 'everysec',
    onWarning: (w) => log(`[hold-sweeper] ${w.message}`),
  })
  const sweeper = new HoldSweeper({
    db,
    locks,
    returns,
    ...settings,
    onSwept: (outcome, product_id) => {
      metrics.holdSweeps.inc({ outcome })
      if (outcome === 'fenced_out') metrics.holdSweepFencedOut.inc({ product_id })
    },
    onExpired: (product_id, n) => metrics.ordersExpired.inc({ product_id }, n),
    onHolds: (product_id, n) => metrics.holdsActive.set({ product_id }, n),
    log,
  })
  sweeper.start()
  return {
    async stop() {
      await sweeper.stop()
      await locks.close()
    },
  }
}
