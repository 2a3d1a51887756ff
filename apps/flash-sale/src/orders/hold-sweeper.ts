import { setTimeout as sleep } from 'node:timers/promises'
import { KunciError, type RedisLock } from 'kunci'
import { type Db, inTransaction } from '../db/database.js'
import { type EndedOrder, endOrders } from '../sql/held-orders.js'
import { activeHolds, dueHolds, fenceSweep, holdSales } from '../sql/hold-sweeps.js'
import type { UnitReturns } from './unit-returns.js'

/** The sweeper's schedule and lock. Keep the `@defaultValue` tags in step with DEFAULT_HOLD_SWEEPER. */
export interface HoldSweeperOptions {
  db: Db
  /** kunci's lock on the sales' Redis (single node or Cluster): one sweeper per sale at a time. */
  locks: RedisLock
  returns: UnitReturns
  /** Time between two sweeps of every hold sale, in ms. @defaultValue 1000 */
  intervalMs?: number
  /**
   * TTL of a sale's sweep lock, in ms: how long a sweeper that died or stalled keeps the others
   * out (kunci extends it while a sweep runs). @defaultValue 3000
   */
  lockTtlMs?: number
  /** Orders expired per SQL transaction. @defaultValue 200 */
  batchSize?: number
  /** Batches per sale and sweep, so one sale's backlog does not hold the lock for long. @defaultValue 25 */
  maxBatches?: number
  /**
   * Tests only: stall this long at one point of a sweep while holding the lock, so a test can
   * SIGSTOP or kill -9 the holder there. `before-write`: just before the fenced transaction (a
   * timer: once the process resumes, the write goes out whatever happened meanwhile, as after a
   * GC pause or a SIGSTOP); `before-return`: after the commit, before the units go back to Redis.
   * A line is logged first.
   */
  testPause?: { at: 'before-write' | 'before-return'; ms: number }
  onSwept?: (outcome: 'swept' | 'busy' | 'fenced_out' | 'unavailable' | 'error', productId: string) => void
  onExpired?: (productId: string, units: number) => void
  onHolds?: (productId: string, active: number) => void
  log?: (line: string) => void
}

export const DEFAULT_HOLD_SWEEPER = Object.freeze({
  intervalMs: 1_000,
  lockTtlMs: 3_000,
  batchSize: 200,
  maxBatches: 25,
})

/** The sale's row carried a newer fence: this sweeper lost its lock, a newer holder has written. */
class FencedOut extends Error {}

/**
 * One fenced transaction of a sweep: the lock's token on the sale's row (`sweep_fence <= fence`:
 * the holder's own batches pass, an older holder's do not), then a batch of reserved orders past
 * pay_by ended as expired. 'fenced_out': a newer holder has written, nothing was (rolled back).
 * The orders returned are committed expired with their units pending: give them back next.
 */
export async function expireDue(
  db: Db,
  o: {
    productId: string
    fence: number
    batchSize: number
    testPause?: HoldSweeperOptions['testPause']
    log?: (line: string) => void
  },
): Promise<EndedOrder[] | 'fenced_out'> {
  if (o.testPause?.at === 'before-write') {
    o.log?.(
      `[hold-sweeper] test pause: sale ${o.productId} fence ${o.fence} before-write ${o.testPause.ms} ms`,
    )
    await sleep(o.testPause.ms)
  }
  return inTransaction(db, async (c): Promise<EndedOrder[] | 'fenced_out'> => {
    // A sweeper stalled after its fenced write holds the sale's row lock, and the worker's
    // persistence waits on that row: PostgreSQL ends such a session after 10 s idle in the
    // transaction (rolled back, nothing written), so no stalled process stops the sale for long.
    if (!(await fenceSweep(c, o.productId, o.fence))) return 'fenced_out'
    const due = await dueHolds(c, o.productId, o.batchSize)
    return endOrders(c, due, 'expired')
  })
}

/**
 * Expires the held orders of every hold sale that were not paid by their pay_by (issue 16), from
 * every worker process, with exactly one sweeper per sale at a time:
 *
 * - Each sweep of a sale runs under kunci's lock `hold-sweep:<product>` (one attempt, no wait:
 *   a busy lock means another worker is sweeping it now). Its TTL is short, so when the holder
 *   dies another worker takes over within a TTL and an interval: expiry depends on no one process.
 * - Every transaction of the sweep first writes the lock's fencing token on the sale's row,
 *   `sweep_fence <= token` (the same holder writes several batches): 0 rows means a holder with
 *   a newer token has written, so this one stalled past its lock (a pause, a partition); it rolls
 *   back and writes nothing. The row lock that write takes also orders two sweepers' transactions.
 * - In that transaction a batch of reserved orders past pay_by (PostgreSQL's clock, the one pay
 *   checks) becomes `expired`, `sold` goes down, unit_return 'pending'; after the commit the
 *   units go back to Redis (UnitReturns); what a crash left pending, every worker's resume loop
 *   finishes (startResumingReturns).
 *
 * What a stalled sweeper can still do once it resumes: finish a Redis return of orders it had
 * already expired and committed (idempotent: each order's unit goes back once), and read. What
 * it cannot: expire anything, or change `sold`.
 */
export class HoldSweeper {
  readonly #o: Required<Omit<HoldSweeperOptions, 'testPause' | 'onSwept' | 'onExpired' | 'onHolds' | 'log'>> &
    HoldSweeperOptions
  #timer: NodeJS.Timeout | undefined
  #running: Promise<void> | undefined
  #stopped = false

  constructor(options: HoldSweeperOptions) {
    // An option left undefined (an unset variable) keeps its default.
    const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined))
    this.#o = { ...DEFAULT_HOLD_SWEEPER, ...(given as HoldSweeperOptions) }
  }

  start(): void {
    this.#stopped = false
    const tick = () => {
      if (this.#stopped) return
      this.#running = this.sweep()
        .catch((err) => this.#o.log?.(`[hold-sweeper] ${(err as Error).message ?? err}`))
        .finally(() => {
          this.#running = undefined
          if (!this.#stopped) this.#timer = setTimeout(tick, this.#o.intervalMs)
        })
    }
    this.#timer = setTimeout(tick, this.#o.intervalMs)
  }

  /** Waits for the sweep in progress (it releases its lock), then stops. */
  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    await this.#running
  }

  /** One sweep of every hold sale (and of a sale reset to instant that still has held orders). */
  async sweep(): Promise<void> {
    const sales = await holdSales(this.#o.db)
    for (const { product_id } of sales) {
      if (this.#stopped) return
      await this.sweepSale(product_id)
    }
  }

  /** One sweep of one sale, if no other worker is sweeping it. */
  async sweepSale(productId: string): Promise<void> {
    const { locks, lockTtlMs, onSwept } = this.#o
    try {
      await locks.using(
        `hold-sweep:${productId}`,
        // One attempt: a held lock is another sweeper at work, there is nothing to wait for.
        { ttlMs: lockTtlMs, retryCount: 0, maxHoldMs: 60_000 },
        (signal, lock) => this.#sweepLocked(productId, lock.fence, signal),
      )
      onSwept?.('swept', productId)
    } catch (err) {
      if (err instanceof FencedOut) {
        this.#o.log?.(
          `[hold-sweeper] sale ${productId}: fence ${err.message} refused (a newer sweeper holds the lock); wrote nothing`,
        )
        onSwept?.('fenced_out', productId)
        return
      }
      if (err instanceof KunciError && err.code !== 'E_INVALID_OPTION') {
        if (err.code === 'E_LOCK_NOT_ACQUIRED') return onSwept?.('busy', productId)
        // Lock nodes unreachable, or the lock lost mid-sweep: the next sweep (any worker) goes on.
        this.#o.log?.(`[hold-sweeper] sale ${productId}: ${err.code}: ${err.message}`)
        onSwept?.('unavailable', productId)
        return
      }
      onSwept?.('error', productId)
      throw err
    } finally {
      await this.#countHolds(productId).catch(() => {})
    }
  }

  async #sweepLocked(productId: string, fence: number, signal: AbortSignal): Promise<void> {
    const { db, returns, batchSize, maxBatches, testPause, onExpired, log } = this.#o
    for (let batch = 0; batch < maxBatches; batch++) {
      // Narrows the window only: a sweeper can stall right after this check, the fence below is
      // what keeps it from writing.
      if (signal.aborted || this.#stopped) return
      const ended = await expireDue(db, { productId, fence, batchSize, testPause, log })
      if (ended === 'fenced_out') throw new FencedOut(String(fence))
      if (ended.length > 0) {
        onExpired?.(productId, ended.length)
        if (testPause?.at === 'before-return') {
          log?.(
            `[hold-sweeper] test pause: sale ${productId} fence ${fence} before-return ${testPause.ms} ms (${ended.length} expired)`,
          )
          await sleep(testPause.ms)
        }
        await returns.give(productId, ended)
      }
      if (ended.length < batchSize) break
    }
    // What a crash (or an unconfirmed return) left pending is not finished here: every worker's
    // resume loop (worker-process.ts, startResumingReturns) does it for every sale each second.
  }

  /** flash_sale_holds_active, from every worker whether it swept or not (no stale gauge). */
  async #countHolds(productId: string): Promise<void> {
    const { db, onHolds } = this.#o
    if (!onHolds) return
    const active = await activeHolds(db, productId)
    onHolds(productId, active)
  }
}
