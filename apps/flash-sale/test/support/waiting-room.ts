import { readDefined } from '@kunci/topology'
import { Cluster } from 'ioredis'
import { Pool } from 'undici'
import type { QueueAnswer } from '../../src/waiting-room/waiting-room.js'
import type { LocalStack } from './stack-fixture.js'

export interface Answer<T = QueueAnswer> {
  status: number
  body: T & { error?: { code: string; reason?: string; position?: number; order_id?: string } }
  /** When the answer arrived (performance.now()). */
  at: number
  /** When the request was sent (performance.now()). */
  sentAt: number
}

/** HTTP to the stack's service, over a pool of connections (spread over its instances). */
export class RoomClient {
  readonly pool: Pool
  constructor(
    readonly url: string,
    connections = 32,
  ) {
    this.pool = new Pool(url, { connections, pipelining: 1 })
  }

  async #call<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}) {
    const sentAt = performance.now()
    try {
      const res = await this.pool.request({
        method,
        path,
        headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: 30_000,
        bodyTimeout: 30_000,
      })
      const parsed = (await res.body.json()) as Answer<T>['body']
      return { status: res.statusCode, body: parsed, at: performance.now(), sentAt }
    } catch {
      // A connection reset (an instance restarting): status 0, as a browser's failed fetch.
      return { status: 0, body: {} as Answer<T>['body'], at: performance.now(), sentAt }
    }
  }

  join(productId: string, userId: string): Promise<Answer> {
    return this.#call('POST', `/v1/sales/${productId}/queue`, { user_id: userId })
  }

  poll(ticket: string): Promise<Answer> {
    return this.#call('GET', `/v1/queue/${encodeURIComponent(ticket)}`)
  }

  checkout(
    productId: string,
    userId: string,
    ticket?: string,
    idempotencyKey?: string,
  ): Promise<Answer<{ order_id?: string; status?: string }>> {
    return this.#call(
      'POST',
      '/v1/checkout',
      { product_id: productId, user_id: userId },
      {
        ...(ticket === undefined ? {} : { 'waiting-room-ticket': ticket }),
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
    )
  }

  close(): Promise<void> {
    return this.pool.close()
  }
}

/** PUT /admin/sales/:id with any body (the stack's putSale knows no waiting room). */
export async function putRoomSale(stack: LocalStack, productId: string, body: Record<string, unknown>) {
  const res = await fetch(`${stack.url}/admin/sales/${productId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ price: 19.99, ...body }),
  })
  const json = (await res.json()) as { waiting_room: { lottery_commitment: string } | null }
  if (!res.ok) throw new Error(`PUT /admin/sales/${productId}: ${res.status} ${JSON.stringify(json)}`)
  return json
}

/** The operator's view of the cluster (the app's ACL user may not read everything we check). */
export function adminRedis(stack: LocalStack): Cluster {
  return new Cluster(stack.cluster.startupNodes, {
    redisOptions: { username: stack.redisAdmin.username, password: stack.redisAdmin.password },
    scaleReads: 'master',
    clusterRetryStrategy: (times) => Math.min(100 * times, 1_000),
  })
}

/** The sum of a metric's samples on a /metrics page whose labels include `labels`. */
export async function metricSum(url: string, name: string, labels: Record<string, string> = {}) {
  const text = await (await fetch(url)).text()
  let sum = 0
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? ([-\d.e+]+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const has = Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))
    if (has) sum += Number(m[3])
  }
  return sum
}

/** Runs `fn` over `items` with at most `concurrency` at once; results in order. */
export async function mapLimit<T, R>(items: readonly T[], concurrency: number, fn: (x: T) => Promise<R>) {
  const out: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        out[i] = await fn(items[i]!)
      }
    }),
  )
  return out
}

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. */
export function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  return readDefined(check, what, { timeoutMs, intervalMs: 50 })
}
