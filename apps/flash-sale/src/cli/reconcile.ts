import { connectDb } from '../db/database.js'
import { OrderStore } from '../orders/order-store.js'
import { reconcile } from '../orders/reconcile.js'
import { connectSaleRedis, whenReady } from '../redis/connect.js'
import { RELAY_GROUP, WORKER_GROUP } from '../redis/keys.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import { SaleStore } from '../sale/sale-store.js'
import type { Command } from './command.js'
import { configFromArgs } from './env-flags.js'

/** How long reconcile may take to read the books before it gives up (exit 2). */
const DEFAULT_TIMEOUT_MS = 60_000

export const reconcileCommand: Command = {
  name: 'reconcile',
  summary:
    'check the books: stock = sold + remaining + pending returns (Redis vs SQL), one payment per paid order, every wallet balance = funded − charged + refunded, none below zero; exit 1 on any drift',
  async run(argv) {
    const parsed = configFromArgs(
      'reconcile',
      argv,
      { json: { type: 'boolean' }, 'timeout-ms': { type: 'string' } },
      {
        ADMIN_TOKEN: 'not-needed-for-reconcile',
        ...process.env,
      },
    )
    if (!parsed) return 2
    const { config } = parsed
    const rawTimeout = parsed.values['timeout-ms']
    const timeoutMs = rawTimeout === undefined ? DEFAULT_TIMEOUT_MS : Number(rawTimeout)
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
      console.error(`reconcile: --timeout-ms ${rawTimeout}: expected a positive integer (milliseconds)`)
      return 2
    }
    const redis = connectSaleRedis(config, 'flash-sale-reconcile')
    const db = connectDb(config.databaseUrl, 2)
    try {
      // Bounded: ioredis retries an unreachable Cluster for ever, and a check that never ends is
      // worse than one that says it could not look (exit 2, not 0 or 1: the books are unknown).
      const deadline = Date.now() + timeoutMs
      const gaveUp = () => {
        console.error(
          `reconcile: could not read Redis and SQL within ${timeoutMs} ms (is the stack up? REDIS_CLUSTER_NODES / DATABASE_URL); nothing was checked`,
        )
        return 2
      }
      // The deadline reports an unreachable Redis; ioredis' own error events add nothing to it.
      redis.on('error', () => {})
      try {
        await whenReady(redis, timeoutMs)
      } catch {
        return gaveUp()
      }
      const store = config.strategy === 'redlock' ? undefined : new SaleStore(redis)
      const work = reconcile(new OrderStore(db), redis, store, config.queueUrl ? RELAY_GROUP : WORKER_GROUP)
      // Observed here: once the deadline answered, a late rejection of the work is of no interest.
      work.catch(() => {})
      const report = await withTimeout(work, Math.max(1, deadline - Date.now())).catch((err: unknown) => {
        if (err instanceof TimeoutError) return undefined
        throw err
      })
      if (report === undefined) return gaveUp()
      if (parsed.values.json) console.log(JSON.stringify(report, null, 2))
      else {
        for (const s of report) {
          console.log(
            `product ${s.product_id} round ${s.round}: stock ${s.stock_total} = sold ${s.sold_in_sql} + remaining ${s.remaining_in_redis ?? '-'} + returns pending ${s.returns_pending}; returned ${s.returned}, reserved ${s.reserved_in_redis ?? '-'}, confirmed ${s.confirmed}, failed ${s.failed}, dead letters ${s.dead_letters}, in queue ${s.in_queue}, payments ${s.payments}` +
              (s.problems.length ? `\n  DRIFT: ${s.problems.join('\n  DRIFT: ')}` : '  ok'),
          )
        }
      }
      return report.some((s) => s.problems.length > 0) ? 1 : 0
    } finally {
      redis.disconnect()
      await withTimeout(db.end(), 2_000).catch(() => {})
    }
  },
}
