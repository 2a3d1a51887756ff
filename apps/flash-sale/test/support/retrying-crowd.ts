import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import type { CheckoutOutcome } from './checkouts.js'

/** One HTTP attempt of the crowd. */
export interface CrowdRequest {
  userId: number
  /** Date.now() when it was sent. */
  sentAt: number
  /** Send to last byte; the client's timeout when it timed out. */
  ms: number
  /** What the service says it spent on it (its Server-Timing header); undefined without an answer. */
  serverMs: number | undefined
  /** HTTP status; 0 for a timeout or a connection error. */
  status: number
  code: string | undefined
  /** The error's message, for a test's failure output. */
  message?: string
  orderId: string | undefined
}

export interface CrowdOptions {
  url: string
  productId: number | string
  /** Concurrent clients (connections), each one user at a time. */
  clients: number
  /** Users from 1 to this; without it, every client takes fresh user ids until stopped. */
  users?: number
  /** The first user id. @defaultValue 1 */
  firstUser?: number
  /** Pause before a retry after 429, 503 or a timeout: uniform in [min, max] ms. @defaultValue [100, 300] */
  retryDelayMs?: [number, number]
  /**
   * A request without an answer after this long is a timeout (retried): a hang, far above any
   * deadline of the service, so that queueing on a loaded machine is not mistaken for one.
   * @defaultValue 10000
   */
  timeoutMs?: number
  /** Pause of a client between one user's final answer and the next user: [min, max] ms. @defaultValue [0, 0] */
  thinkMs?: [number, number]
  /** With `users`, start again at the first user (with new keys) instead of stopping. @defaultValue false */
  cycle?: boolean
  /** The crowd stops (each client after its request in flight) once this resolves or aborts. */
  stop: AbortSignal
  /** Told of every request as its answer (or failure) arrives, e.g. to wait until sales flow. */
  onRequest?: (r: CrowdRequest) => void
}

export interface CrowdResult {
  requests: CrowdRequest[]
  /** The final answer of every user that got one (200/202/409/4xx other than 429), for violations(). */
  finals: CheckoutOutcome[]
  /** Users that were still retrying when the crowd stopped. */
  unanswered: number
}

/** One checkout as a client sees it (CrowdRequest without the user). */
export type CheckoutAttempt = Omit<CrowdRequest, 'userId'>

/**
 * POST /v1/checkout once with an Idempotency-Key: the answer's status, code, order and the
 * service's own time (Server-Timing); status 0 for no answer within `timeoutMs` or a broken
 * connection. The one request of the crowds (this file, partition-crowd.ts).
 */
export async function postCheckout(
  pool: Pool,
  r: { productId: number | string; userId: number; key: string; timeoutMs: number },
): Promise<CheckoutAttempt> {
  const sentAt = Date.now()
  const started = performance.now()
  try {
    const res = await pool.request({
      method: 'POST',
      path: '/v1/checkout',
      headers: { 'content-type': 'application/json', 'idempotency-key': r.key },
      body: JSON.stringify({ product_id: Number(r.productId), user_id: r.userId }),
      headersTimeout: r.timeoutMs,
      bodyTimeout: r.timeoutMs,
    })
    const text = await res.body.text()
    let body: { order_id?: string; error?: { code?: string; order_id?: string; message?: string } } = {}
    try {
      body = JSON.parse(text)
    } catch {}
    const timing = /app;dur=([\d.]+)/.exec(String(res.headers['server-timing'] ?? ''))
    return {
      sentAt,
      ms: performance.now() - started,
      serverMs: timing ? Number(timing[1]) : undefined,
      status: res.statusCode,
      code: body.error?.code,
      ...(body.error?.message ? { message: body.error.message } : {}),
      orderId: body.order_id ?? body.error?.order_id,
    }
  } catch (err) {
    // Why there was no answer (a timeout, a reset, a socket closed by the other side), for a
    // failure's message: the status alone cannot tell a hang from an instance that died.
    const e = err as Error & { code?: string; cause?: { code?: string } }
    return {
      sentAt,
      ms: performance.now() - started,
      serverMs: undefined,
      status: 0,
      code: undefined,
      message: `${e.code ?? e.cause?.code ?? e.name}: ${e.message}`,
      orderId: undefined,
    }
  }
}

/**
 * The crowd of issue 13: each client is one user at a time who posts a checkout with an
 * Idempotency-Key of their own and, on 429, 503 or a timeout, retries it with the same key after
 * 100–300 ms, for as long as it takes; then the next user. Unlike a ramp with think time, this is
 * the load a sold-out sale gets: every refusal comes straight back.
 */
export async function runRetryingCrowd(o: CrowdOptions): Promise<CrowdResult> {
  const [minDelay, maxDelay] = o.retryDelayMs ?? [100, 300]
  const timeoutMs = o.timeoutMs ?? 10_000
  const pool = new Pool(o.url, { connections: o.clients, pipelining: 1 })
  const requests: CrowdRequest[] = []
  const finals: CheckoutOutcome[] = []
  const firstUser = o.firstUser ?? 1
  let nextUser = firstUser
  const lastUser = o.users === undefined ? Number.POSITIVE_INFINITY : firstUser + o.users - 1
  const [minThink, maxThink] = o.thinkMs ?? [0, 0]
  let unanswered = 0

  const attempt = async (userId: number, key: string): Promise<CrowdRequest> => ({
    userId,
    ...(await postCheckout(pool, { productId: o.productId, userId, key, timeoutMs })),
  })

  const client = async () => {
    while (!o.stop.aborted) {
      if (nextUser > lastUser) {
        if (!o.cycle) break
        nextUser = firstUser
      }
      const userId = nextUser++
      const key = randomUUID()
      for (let retries = 0; ; retries++) {
        const r = await attempt(userId, key)
        requests.push(r)
        o.onRequest?.(r)
        if (r.status !== 0 && r.status !== 429 && r.status !== 503) {
          finals.push({
            userId,
            status: r.status,
            retries,
            body: {
              ...(r.status < 300 ? { order_id: r.orderId } : {}),
              ...(r.code ? { error: { code: r.code, order_id: r.orderId } } : {}),
            },
          })
          break
        }
        if (o.stop.aborted) {
          unanswered++
          break
        }
        await sleep(minDelay + Math.random() * (maxDelay - minDelay))
      }
      if (maxThink > 0) await sleep(minThink + Math.random() * (maxThink - minThink))
    }
  }
  await Promise.all(Array.from({ length: o.clients }, client))
  await pool.close()
  return { requests, finals, unanswered }
}

export interface FailoverTimes {
  killAt: number
  promotedAt: number
}

/** What a crowd's requests say about a failover, for the assertions of issue 13. */
export function failoverFacts(requests: CrowdRequest[], t: FailoverTimes) {
  const answered = (r: CrowdRequest) => r.status === 200 || r.status === 202 || r.status === 409
  const firstAnswered = requests
    .filter((r) => r.sentAt >= t.promotedAt && answered(r))
    .reduce((min, r) => Math.min(min, r.sentAt + r.ms), Number.POSITIVE_INFINITY)
  const statuses: Record<string, number> = {}
  for (const r of requests) statuses[r.status] = (statuses[r.status] ?? 0) + 1
  return {
    statuses,
    /** From the promotion (seen by every node) to the first 200/202/409 of a request sent after it. */
    recoveryMs: firstAnswered - t.promotedAt,
    /** Requests sent at least `ms` after the promotion, and those of them not answered 200/202/409. */
    after: (ms: number) => {
      const late = requests.filter((r) => r.sentAt >= t.promotedAt + ms)
      return { sent: late.length, failed: late.filter((r) => !answered(r)) }
    },
    slowest: (status: number) =>
      requests.filter((r) => r.status === status).reduce((m, r) => Math.max(m, r.ms), 0),
  }
}

export interface Probe {
  sentAt: number
  ms: number
  /** The service's Server-Timing, where it sends one. */
  serverMs: number | undefined
  status: number
  body: string
}

/** GETs `url` every `everyMs` (one at a time) until `stop` aborts; a request is given up after 10 s. */
export async function poll(url: string, everyMs: number, stop: AbortSignal): Promise<Probe[]> {
  const probes: Probe[] = []
  while (!stop.aborted) {
    const sentAt = Date.now()
    const started = performance.now()
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) }).then(
      async (r) => {
        const timing = /app;dur=([\d.]+)/.exec(r.headers.get('server-timing') ?? '')
        return { status: r.status, body: await r.text(), serverMs: timing ? Number(timing[1]) : undefined }
      },
      () => ({ status: 0, body: '', serverMs: undefined }),
    )
    probes.push({ sentAt, ms: performance.now() - started, ...res })
    await sleep(everyMs)
  }
  return probes
}
