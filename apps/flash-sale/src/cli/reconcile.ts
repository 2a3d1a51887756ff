import { connectDb } from '../db/database.js'
import { OrderStore } from '../orders/order-store.js'
import { reconcile } from '../orders/reconcile.js'
import { connectSaleRedis, whenReady } from '../redis/connect.js'
import { RELAY_GROUP, WORKER_GROUP } from '../redis/keys.js'
import { SaleStore } from '../sale/sale-store.js'
import type { Command } from './command.js'
import { configFromArgs } from './env-flags.js'

export const reconcileCommand: Command = {
  name: 'reconcile',
  summary:
    'check the books: stock = sold + remaining + pending returns (Redis vs SQL), one payment per paid order, every wallet balance = funded − charged + refunded, none below zero; exit 1 on any drift',
  async run(argv) {
    const parsed = configFromArgs(
      'reconcile',
      argv,
      { json: { type: 'boolean' } },
      {
        ADMIN_TOKEN: 'not-needed-for-reconcile',
        ...process.env,
      },
    )
    if (!parsed) return 2
    const { config } = parsed
    const redis = connectSaleRedis(config, 'flash-sale-reconcile')
    const db = connectDb(config.databaseUrl, 2)
    try {
      await whenReady(redis)
      const store = config.strategy === 'redlock' ? undefined : new SaleStore(redis)
      const report = await reconcile(
        new OrderStore(db),
        redis,
        store,
        config.queueUrl ? RELAY_GROUP : WORKER_GROUP,
      )
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
      await db.end()
      redis.disconnect()
    }
  },
}
