// Open loop: requests leave at a fixed rate whatever the answers do, and each latency is measured
// from the request's *scheduled* time, not from when it was actually written. A slow answer
// therefore cannot hide the requests that should have been sent while it was outstanding
// (coordinated omission): if the generator or a connection falls behind, the wait counts.
//
// The scheduler wakes about every millisecond and sends every request whose time has come, so at
// 3,000 requests/s it sends bursts of ~3; `sendLag` reports how late the sends really were.
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'

export interface OpenLoopOptions {
  url: string
  /** Requests per second. */
  rate: number
  /** Seconds sent at the rate before the measured window. */
  warmupS: number
  /** Measured seconds. */
  seconds: number
  connections: number
  productId: number
  /**
   * 'fresh': a new user per request (every answer a sale); 'random': a user uniform in
   * [1, userIdMax], as the k6 scenario draws them (a sold-out sale's flood).
   * @defaultValue 'fresh'
   */
  users?: 'fresh' | 'random'
  userIdMax: number
  /** A fresh Idempotency-Key per request. @defaultValue true */
  idempotencyKeys?: boolean
  /** Called once the warm-up is over (when the measured requests start being sent). */
  onMeasureStart?: () => void
  /** A request without an answer after this long is a 'timeout'. @defaultValue 5000 */
  timeoutMs?: number
}

export interface Percentiles {
  count: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  p999Ms: number
  maxMs: number
}

export interface OpenLoopSample {
  rate: number
  /** Requests scheduled in the measured window. */
  scheduled: number
  /** Answers per second over the measured window. */
  answeredPerSecond: number
  byStatus: Record<string, number>
  byErrorCode: Record<string, number>
  transportErrors: Record<string, number>
  /** From the scheduled send time to the end of the body: what a user arriving at that time waited. */
  latency: Percentiles
  /** From the actual send to the end of the body (hides generator lag; for comparison only). */
  serviceTime: Percentiles
  /** How late requests were sent after their scheduled time. */
  sendLag: Percentiles
}

function summarize(values: Float64Array, count: number): Percentiles {
  const sorted = values.slice(0, count).sort()
  const at = (p: number) =>
    count === 0 ? Number.NaN : sorted[Math.min(count, Math.max(1, Math.ceil((p / 100) * count))) - 1]!
  const round = (v: number) => Math.round(v * 1000) / 1000
  return {
    count,
    p50Ms: round(at(50)),
    p90Ms: round(at(90)),
    p99Ms: round(at(99)),
    p999Ms: round(at(99.9)),
    maxMs: round(at(100)),
  }
}

export async function runOpenLoop(o: OpenLoopOptions): Promise<OpenLoopSample> {
  const timeoutMs = o.timeoutMs ?? 5_000
  const pool = new Pool(new URL(o.url).origin, { connections: o.connections, pipelining: 1 })
  const intervalMs = 1000 / o.rate
  const total = Math.round(o.rate * (o.warmupS + o.seconds))
  const measureFrom = Math.round(o.rate * o.warmupS)
  const measured = total - measureFrom
  const latency = new Float64Array(measured)
  const service = new Float64Array(measured)
  const lag = new Float64Array(measured)
  let answered = 0
  let lagged = 0
  const byStatus: Record<string, number> = {}
  const byErrorCode: Record<string, number> = {}
  const transportErrors: Record<string, number> = {}
  const userBase = Math.floor(Math.random() * (o.userIdMax / 2))
  const randomUsers = o.users === 'random'
  const keys = o.idempotencyKeys ?? true
  const inflight = new Set<Promise<void>>()

  const fire = (i: number, scheduled: number) => {
    const sentAt = performance.now()
    const counted = i >= measureFrom
    if (i === measureFrom) o.onMeasureStart?.()
    if (counted) lag[lagged++] = sentAt - scheduled
    const request = pool
      .request({
        path: '/v1/checkout',
        method: 'POST',
        headers: keys
          ? { 'content-type': 'application/json', 'idempotency-key': randomUUID() }
          : { 'content-type': 'application/json' },
        // 'fresh': a new user per request, so every answer is a sale, none an ALREADY_PURCHASED.
        body: JSON.stringify({
          product_id: o.productId,
          user_id: randomUsers ? 1 + Math.floor(Math.random() * o.userIdMax) : userBase + i + 1,
        }),
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      })
      .then(
        async (res) => {
          const text = await res.body.text()
          const end = performance.now()
          if (!counted) return
          latency[answered] = end - scheduled
          service[answered] = end - sentAt
          answered++
          const status = String(res.statusCode)
          byStatus[status] = (byStatus[status] ?? 0) + 1
          if (res.statusCode >= 300) {
            let code = `HTTP_${status}`
            try {
              const c = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code
              if (typeof c === 'string') code = c
            } catch {}
            byErrorCode[code] = (byErrorCode[code] ?? 0) + 1
          }
        },
        (err: { code?: string }) => {
          if (!counted) return
          const kind = err.code ?? 'other'
          transportErrors[kind] = (transportErrors[kind] ?? 0) + 1
        },
      )
      .finally(() => inflight.delete(request))
    inflight.add(request)
  }

  const t0 = performance.now() + 5
  let next = 0
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now()
      while (next < total && t0 + next * intervalMs <= now) {
        fire(next, t0 + next * intervalMs)
        next++
      }
      if (next < total) setTimeout(tick, 1)
      else resolve()
    }
    setTimeout(tick, 5)
  })
  await Promise.allSettled([...inflight])
  await pool.close()
  return {
    rate: o.rate,
    scheduled: measured,
    answeredPerSecond: Math.round(answered / o.seconds),
    byStatus,
    byErrorCode,
    transportErrors,
    latency: summarize(latency, answered),
    serviceTime: summarize(service, answered),
    sendLag: summarize(lag, lagged),
  }
}
