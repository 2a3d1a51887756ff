import pg from 'pg'
import type { CheckoutOutcome } from './checkouts.js'
import { eventually } from './eventually.js'

export interface SaleFacts {
  confirmed: { order_id: string; user_id: string }[]
  failed: number
  payments: number
  doubleCharges: number
  usersTwice: number
  walletMismatch: boolean
}

export async function saleFacts(databaseUrl: string, productId: string): Promise<SaleFacts> {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  try {
    const round = (await db.query('SELECT round FROM sales WHERE product_id = $1', [productId])).rows[0]
      ?.round
    const confirmed = await db.query(
      `SELECT order_id, user_id FROM orders WHERE product_id = $1 AND round = $2 AND status = 'confirmed'`,
      [productId, round],
    )
    const failed = await db.query(
      `SELECT count(*)::int AS n FROM orders WHERE product_id = $1 AND round = $2 AND status = 'failed'`,
      [productId, round],
    )
    const payments = await db.query(
      `SELECT count(*)::int AS n, count(DISTINCT p.order_id)::int AS distinct_orders
       FROM payments p JOIN orders o USING (order_id) WHERE o.product_id = $1 AND o.round = $2`,
      [productId, round],
    )
    const twice = await db.query(
      `SELECT count(*)::int AS n FROM (SELECT user_id FROM orders WHERE product_id = $1 AND round = $2
       AND status = 'confirmed' GROUP BY user_id HAVING count(*) > 1) t`,
      [productId, round],
    )
    const wallets = await db.query(
      'SELECT (SELECT coalesce(sum(charged_cents), 0) FROM wallets) = (SELECT coalesce(sum(amount_cents), 0) FROM payments) AS ok',
    )
    const p = payments.rows[0]
    return {
      confirmed: confirmed.rows,
      failed: failed.rows[0].n,
      payments: p.n,
      doubleCharges: p.n - p.distinct_orders,
      usersTwice: twice.rows[0].n,
      walletMismatch: !wallets.rows[0].ok,
    }
  } finally {
    await db.end()
  }
}

/**
 * Waits until the worker has settled `expected` orders (confirmed + failed) in SQL; after
 * `timeoutMs` returns what SQL holds then, so that violations() lists what is missing.
 */
export async function waitForSettled(
  databaseUrl: string,
  productId: string,
  expected: number,
  timeoutMs = 60_000,
): Promise<SaleFacts> {
  const settled = (f: SaleFacts) => f.confirmed.length + f.failed >= expected
  return eventually(() => saleFacts(databaseUrl, productId), settled, { timeoutMs, intervalMs: 200 }).catch(
    () => saleFacts(databaseUrl, productId),
  )
}

/** The checks every strategy that claims correctness must pass, as a list of violations. */
export function violations(outcomes: CheckoutOutcome[], facts: SaleFacts, stock: number): string[] {
  const v: string[] = []
  const sold = outcomes.filter((o) => o.status === 200 || o.status === 202)
  if (sold.length > stock) v.push(`oversold: ${sold.length} successful answers for ${stock} units`)
  if (facts.confirmed.length > stock) v.push(`oversold in SQL: ${facts.confirmed.length} confirmed`)
  if (facts.payments !== facts.confirmed.length)
    v.push(`${facts.payments} payments for ${facts.confirmed.length} orders`)
  if (facts.doubleCharges > 0) v.push(`${facts.doubleCharges} double charges`)
  if (facts.usersTwice > 0) v.push(`${facts.usersTwice} users bought twice`)
  if (facts.walletMismatch) v.push('wallet totals differ from payments')
  const persisted = new Map(facts.confirmed.map((o) => [o.order_id, o.user_id]))
  for (const o of outcomes.filter((x) => x.status === 200)) {
    const user = persisted.get(o.body.order_id ?? '')
    if (user === undefined)
      v.push(`200 for order ${o.body.order_id} (user ${o.userId}) but no confirmed order in SQL`)
    else if (user !== String(o.userId))
      v.push(`order ${o.body.order_id} answered to user ${o.userId}, persisted for ${user}`)
  }
  const answered = new Set(sold.map((o) => o.body.order_id))
  const repeats = outcomes.filter((o) => o.status === 409 && o.body.error?.code === 'ALREADY_PURCHASED')
  for (const o of facts.confirmed) {
    // Every persisted order was answered to somebody (as 200/202, or as the order_id of an ALREADY_PURCHASED).
    if (!answered.has(o.order_id) && !repeats.some((r) => r.body.error?.order_id === o.order_id)) {
      v.push(`order ${o.order_id} persisted but never answered`)
    }
  }
  return v
}
