import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'

export interface CheckoutCall {
  userId: number
  idempotencyKey?: string
}

export interface CheckoutOutcome {
  userId: number
  status: number
  body: { order_id?: string; status?: string; error?: { code: string; order_id?: string } }
  /** 429/503 answers that were retried before this final one. */
  retries: number
}

/**
 * Sends checkouts with at most `concurrency` in flight, like many users at once. A 429/503 is
 * retried (as a well-behaved client honouring Retry-After would, with a short delay) until
 * `deadlineMs`; the outcome recorded is the final answer.
 */
export async function runCheckouts(opts: {
  url: string
  productId: number | string
  calls: CheckoutCall[]
  concurrency?: number
  retryBusy?: boolean
  deadlineMs?: number
}): Promise<CheckoutOutcome[]> {
  const pool = new Pool(opts.url, { connections: opts.concurrency ?? 64, pipelining: 1 })
  const deadline = Date.now() + (opts.deadlineMs ?? 120_000)
  const outcomes: CheckoutOutcome[] = new Array(opts.calls.length)
  let next = 0
  const one = async (call: CheckoutCall): Promise<CheckoutOutcome> => {
    for (let retries = 0; ; retries++) {
      let status = 0
      let body: CheckoutOutcome['body'] = {}
      try {
        const res = await pool.request({
          method: 'POST',
          path: '/v1/checkout',
          headers: {
            'content-type': 'application/json',
            ...(call.idempotencyKey ? { 'idempotency-key': call.idempotencyKey } : {}),
          },
          body: JSON.stringify({ product_id: opts.productId, user_id: call.userId }),
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        })
        status = res.statusCode
        body = (await res.body.json()) as CheckoutOutcome['body']
      } catch {
        status = 0 // connection error: an instance restarting; retried like a 503
      }
      const retryable = status === 0 || status === 503 || (status === 429 && opts.retryBusy !== false)
      if (!retryable || Date.now() > deadline) return { userId: call.userId, status, body, retries }
      await sleep(20 + Math.random() * 80)
    }
  }
  const lanes = Array.from({ length: Math.min(opts.concurrency ?? 64, opts.calls.length) }, async () => {
    while (next < opts.calls.length) {
      const i = next++
      outcomes[i] = await one(opts.calls[i]!)
    }
  })
  await Promise.all(lanes)
  await pool.close()
  return outcomes
}

/** `total` calls from `users` distinct users; the rest are repeats of random users (impatient double-buyers). */
export function crowd(total: number, users: number, firstUser = 1): CheckoutCall[] {
  const calls: CheckoutCall[] = []
  for (let i = 0; i < users; i++) calls.push({ userId: firstUser + i })
  while (calls.length < total) calls.push({ userId: firstUser + Math.floor(Math.random() * users) })
  for (let i = calls.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[calls[i], calls[j]] = [calls[j]!, calls[i]!]
  }
  return calls
}

export function countBy<T>(items: T[], key: (t: T) => string | number): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const t of items) counts[key(t)] = (counts[key(t)] ?? 0) + 1
  return counts
}
