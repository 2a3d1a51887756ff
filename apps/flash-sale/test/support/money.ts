import { spawn } from 'node:child_process'
import pg from 'pg'
import type { SaleCounts } from '../../src/sale/sale-admin.js'
import { serviceCliPath } from './stack-fixture.js'

/** Minimal view of a local stack these helpers need. */
interface Reachable {
  url: string
  adminToken: string
  env: Record<string, string>
  databaseUrl: string
}

export async function putWallet(stack: Reachable, userId: string | number, balance: number) {
  const res = await fetch(`${stack.url}/admin/wallets/${userId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ balance }),
  })
  if (!res.ok) throw new Error(`PUT /admin/wallets/${userId}: ${res.status} ${await res.text()}`)
  return (await res.json()) as { user_id: string; balance: number; charged: number; charges: number }
}

export async function getWallet(stack: Reachable, userId: string | number) {
  const res = await fetch(`${stack.url}/v1/wallets/${userId}`)
  return (await res.json()) as { user_id: string; balance: number; charged: number; charges: number }
}

/** GET /admin/sales/:id, as the service builds it. */
export type AdminSaleCounts = SaleCounts

export async function adminSale(stack: Reachable, productId: string): Promise<AdminSaleCounts> {
  const res = await fetch(`${stack.url}/admin/sales/${productId}`, {
    headers: { authorization: `Bearer ${stack.adminToken}` },
  })
  return (await res.json()) as AdminSaleCounts
}

/** `flash-sale reconcile --json` against the stack: its exit code and report. */
export function runReconcile(stack: Reachable) {
  return new Promise<{
    code: number | null
    report: { product_id: string; problems: string[]; [k: string]: unknown }[]
    out: string
    err: string
  }>((resolve) => {
    const child = spawn(process.execPath, [serviceCliPath(), 'reconcile', '--json'], {
      env: { ...process.env, ...stack.env },
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
    })
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString()
    })
    child.on('exit', (code) => {
      let report: { product_id: string; problems: string[] }[] = []
      try {
        report = JSON.parse(out)
      } catch {}
      resolve({ code, report, out, err })
    })
  })
}

/** The money facts of a set of users, from SQL. */
export async function moneyFacts(databaseUrl: string, users: readonly string[]) {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  try {
    const r = await db.query<{
      payments: number
      charged_twice: number
      negative: number
      drifting: number
    }>(
      `SELECT
         (SELECT count(*)::int FROM payments WHERE user_id = ANY($1)) AS payments,
         (SELECT count(*)::int FROM (SELECT p.user_id, o.product_id FROM payments p JOIN orders o USING (order_id)
            WHERE p.user_id = ANY($1) GROUP BY 1, 2 HAVING count(*) > 1) t) AS charged_twice,
         (SELECT count(*)::int FROM wallets WHERE balance_cents < 0) AS negative,
         (SELECT count(*)::int FROM wallets WHERE balance_cents <> funded_cents - charged_cents + refunded_cents) AS drifting`,
      [users],
    )
    return r.rows[0]!
  } finally {
    await db.end()
  }
}

export async function sql<T extends pg.QueryResultRow = Record<string, unknown>>(
  databaseUrl: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  try {
    return (await db.query<T>(text, values)).rows
  } finally {
    await db.end()
  }
}
