// Issue 15, batched persistence end to end: 3,000 reservations wait in the stream with the worker
// stopped (and one poison entry among them), the worker starts and is killed with kill -9 in the
// middle of its batches, then restarted: every reservation persisted exactly once, nobody charged
// twice, the poison entry dead-lettered, the rest of its batch written.
import { Cluster } from 'ioredis'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { saleKeys } from '../../src/redis/keys.js'
import { eventually } from '../support/eventually.js'
import { useStack } from '../support/stack-fixture.js'

const N = 3_000

/**
 * One user's checkout as a real client makes it: its own Idempotency-Key, retried with the same
 * key on 429/503 (an instance shedding load on a busy machine) until a final answer.
 */
async function buy(url: string, productId: string, userId: number): Promise<number> {
  const key = `batch-${productId}-${userId}`
  const deadline = Date.now() + 60_000
  for (;;) {
    const status = await fetch(`${url}/v1/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ product_id: productId, user_id: userId }),
    }).then((r) => r.status)
    if ((status !== 429 && status !== 503) || Date.now() > deadline) return status
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 100))
  }
}

describe('the worker persists in batches, exactly once through a kill -9', () => {
  const fx = useStack(
    { strategy: 'lua', instances: 2, lockNodes: false, durability: 'none', env: { CLAIM_IDLE_MS: '2000' } },
    { db: 'fs_batch_stack' },
  )

  it('3,000 reservations, a poison entry, kill -9 mid-batch: every order once, the poison dead-lettered', {
    timeout: 180_000,
  }, async () => {
    const { stack } = fx
    const productId = '8201'
    await stack.putSale({ productId, stock: N })
    await stack.worker.stop()
    const sql = new pg.Client({ connectionString: stack.databaseUrl })
    await sql.connect()
    const admin = new Cluster(stack.cluster.startupNodes, {
      redisOptions: { username: stack.redisAdmin.username, password: stack.redisAdmin.password },
    })
    try {
      for (let u = 1; u <= N; u += 200) {
        const answers = await Promise.all(
          Array.from({ length: Math.min(200, N - u + 1) }, (_, i) => buy(stack.url, productId, u + i)),
        )
        expect(answers.filter((s) => s !== 200)).toEqual([])
        // The poison entry: an order SQL refuses (unit_no beyond PostgreSQL's integer), in the
        // middle of the stream, so it lands inside one of the worker's batches.
        if (u === 1_401) {
          const round = await admin.hget(saleKeys(productId).meta, 'round')
          await admin.xadd(
            saleKeys(productId).orders,
            '*',
            ...[
              'order_id',
              `${productId}.poison`,
              'user_id',
              'poisoner',
              'round',
              round!,
              'unit',
              '3000000000',
            ],
            ...['price_cents', '4999', 'reserved_at', String(Date.now())],
          )
        }
      }
      const confirmed = async () =>
        Number(
          (
            await sql.query<{ n: string }>(
              `SELECT count(*) AS n FROM orders WHERE product_id = $1 AND status = 'confirmed'`,
              [productId],
            )
          ).rows[0]!.n,
        )
      stack.worker.start()
      // Killed while some orders are written and others are not.
      await eventually(confirmed, (n) => n > 0, {
        timeoutMs: 60_000,
        intervalMs: 20,
        what: 'a first batch persisted',
      })
      await stack.worker.kill()
      const atKill = await confirmed()
      expect(atKill).toBeLessThan(N)
      stack.worker.start()
      await eventually(confirmed, (n) => n >= N, {
        timeoutMs: 120_000,
        intervalMs: 250,
        what: 'every order persisted',
      })
      const books = (
        await sql.query<{ orders: string; payments: string; distinct_payments: string; users_twice: string }>(
          `SELECT (SELECT count(*) FROM orders WHERE product_id = $1 AND status = 'confirmed') AS orders,
                  (SELECT count(*) FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1) AS payments,
                  (SELECT count(DISTINCT p.order_id) FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1) AS distinct_payments,
                  (SELECT count(*) FROM (SELECT user_id FROM orders WHERE product_id = $1 AND status = 'confirmed'
                     GROUP BY user_id HAVING count(*) > 1) t) AS users_twice`,
          [productId],
        )
      ).rows[0]!
      expect(books).toEqual({
        orders: String(N),
        payments: String(N),
        distinct_payments: String(N),
        users_twice: '0',
      })
      // The poison entry: dead-lettered after its deliveries, its order failed, nothing else lost.
      await eventually(
        () => admin.xlen(saleKeys(productId).dead),
        (n) => n === 1,
        { timeoutMs: 60_000, what: 'the poison entry dead-lettered' },
      )
      const dead = await admin.xrange(saleKeys(productId).dead, '-', '+')
      expect(dead[0]![1]).toContain(`${productId}.poison`)
      const counts = await eventually(
        () =>
          fetch(`${stack.url}/admin/sales/${productId}`, {
            headers: { authorization: `Bearer ${stack.adminToken}` },
          }).then((r) => r.json() as Promise<{ persisted: number; pending: number }>),
        (c) => c.pending === 0,
        { timeoutMs: 30_000, what: 'nothing pending' },
      )
      expect(counts.persisted).toBe(N)
    } finally {
      admin.disconnect()
      await sql.end()
    }
  })
})
