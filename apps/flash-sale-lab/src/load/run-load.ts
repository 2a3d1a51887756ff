// The load generator: k6-style ramping virtual users on undici's Pool (keep-alive connections,
// one request in flight per connection), each VU a loop of purchases by random users; or, in the
// crowd modes (see LoadMode, journeys.ts), each VU one user from arrival to a final answer,
// straight to the checkout or through the sale's waiting room, recorded per user.
//
// Decisions the issue leaves open:
// - A purchase is one user's attempt: a fresh Idempotency-Key (UUID) when keys are on, sent twice
//   at once for a double click, and repeated with the same user and key after the think time when
//   the answer was 429/503 and the user is one of the `repeatRatio` who retry (Retry-After is not
//   honoured: a flash-sale buyer clicks again).
// - Ramp-down and the end of the stages are graceful: a VU above the target finishes its purchase
//   and stops (k6's gracefulRampDown); the duration cap stops VUs the same way, and requests in
//   flight may take up to timeoutMs more. The caller's signal is a hard stop: in-flight requests
//   are aborted and counted as 'aborted' transport errors.
import { randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import { type Answer, directJourney, type JourneyContext, newUser, roomJourney } from './journeys.js'
import { type LoadOptions, type ResolvedLoadOptions, resolveLoadOptions } from './load-options.js'
import { Recorder } from './recorder.js'
import {
  LOAD_RESULT_VERSION,
  type LoadOp,
  type LoadOrder,
  type LoadResult,
  type LoadSecond,
  type LoadUser,
} from './result.js'
import { arrivalsBy, peakVus, totalDurationMs, vusAt } from './stages.js'

export interface RunLoadHooks {
  /** Hard stop: in-flight requests are aborted, the result so far is returned. */
  signal?: AbortSignal
  /** Called once per second of the run, for a progress line or live plots. */
  onSecond?: (second: LoadSecond) => void
}

const TICK_MS = 50
const CHECKOUT_PATH = '/v1/checkout'

/** What a failed request's error was, below HTTP. */
export function classifyTransportError(err: unknown, aborted: boolean): string {
  if (aborted) return 'aborted'
  const code = (err as { code?: unknown } | null)?.code
  switch (code) {
    case 'ECONNREFUSED':
      return 'refused'
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return 'reset'
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'timeout'
    default:
      return 'other'
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export async function runLoad(input: LoadOptions = {}, hooks: RunLoadHooks = {}): Promise<LoadResult> {
  const options: ResolvedLoadOptions = resolveLoadOptions(input)
  const url = new URL(options.url)
  const basePath = url.pathname === '/' ? '' : url.pathname
  const peak = Math.max(1, peakVus(options.stages))
  // Two connections per VU: a double click sends both requests at once.
  const pool = new Pool(url.origin, { connections: peak * 2, pipelining: 1 })
  const recorder = new Recorder(options.recordOrders)
  const stagesMs = totalDurationMs(options.stages)
  const endMs = Math.min(stagesMs, options.maxDurationMs)
  const hard = new AbortController()
  const soft = new AbortController() // stops think times and retries at the end of the run
  // Every request in flight listens on it: hundreds of VUs are not a listener leak.
  setMaxListeners(0, hard.signal, soft.signal)
  const onAbort = () => {
    soft.abort()
    hard.abort()
  }
  hooks.signal?.addEventListener('abort', onAbort, { once: true })

  const startedAtMs = Date.now()
  const t0 = performance.now()
  const elapsed = () => performance.now() - t0
  let wanted = 0
  const running = new Map<number, Promise<void>>()

  /** One request; undefined = no HTTP answer (a transport error, counted). */
  const call = async (
    op: LoadOp,
    userId: number,
    request: { method: 'GET' | 'POST'; path: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Answer | undefined> => {
    const headers: Record<string, string> = { ...request.headers }
    if (request.body !== undefined) headers['content-type'] = 'application/json'
    recorder.sent(op)
    const start = performance.now()
    try {
      const res = await pool.request({
        path: basePath + request.path,
        method: request.method,
        headers,
        ...(request.body === undefined ? {} : { body: JSON.stringify(request.body) }),
        signal: hard.signal,
        // Per phase, not in total: a slow body after slow headers can take up to twice as long.
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      })
      const body = parseJson(await res.body.text()) as Record<string, unknown> | undefined
      const latencyMs = performance.now() - start
      let order: LoadOrder | undefined
      let code: string | undefined
      if (
        op === 'checkout' &&
        (res.statusCode === 200 || res.statusCode === 202) &&
        typeof body?.order_id === 'string'
      ) {
        order = { order_id: body.order_id, user_id: userId, status: res.statusCode }
      } else if (res.statusCode >= 300) {
        const errorCode = (body?.error as { code?: unknown } | undefined)?.code
        code = typeof errorCode === 'string' ? errorCode : `HTTP_${res.statusCode}`
      }
      recorder.answer(res.statusCode, latencyMs, code, order, op)
      return { status: res.statusCode, body, code }
    } catch (err) {
      const kind = classifyTransportError(err, hard.signal.aborted)
      recorder.transportError(kind, err instanceof Error ? err.message : String(err))
      return undefined
    }
  }

  const send = async (userId: number, key: string | undefined): Promise<number | undefined> => {
    const headers: Record<string, string> = key === undefined ? {} : { 'idempotency-key': key }
    const body = { product_id: options.productId, user_id: userId }
    const answer = await call('checkout', userId, { method: 'POST', path: CHECKOUT_PATH, body, headers })
    return answer?.status
  }

  const think = async () => {
    if (options.thinkTimeMs <= 0 || soft.signal.aborted) return
    await sleep(options.thinkTimeMs, undefined, { signal: soft.signal }).catch(() => undefined)
  }

  const pauseBeforeRetry = async () => {
    if (options.retryDelayMs === null) return think()
    const [min, max] = options.retryDelayMs
    if (soft.signal.aborted) return
    await sleep(min + Math.random() * (max - min), undefined, { signal: soft.signal }).catch(() => undefined)
  }

  const purchase = async () => {
    const span = options.userIdMax - options.userIdMin + 1
    const userId = options.userIdMin + Math.floor(Math.random() * span)
    const key = options.idempotencyKeys ? randomUUID() : undefined
    const doubleClick = Math.random() < options.doubleClickRatio
    const retries = Math.random() < options.repeatRatio
    recorder.totals.purchases++
    for (let attempt = 0; ; attempt++) {
      let status: number | undefined
      if (doubleClick && attempt === 0) {
        recorder.totals.doubleClicks++
        const both = await Promise.all([send(userId, key), send(userId, key)])
        status = both[0]
      } else {
        status = await send(userId, key)
      }
      const refused = status === undefined || status === 429 || status === 503
      if (!refused || !retries || attempt >= options.maxRetries || soft.signal.aborted) return
      await pauseBeforeRetry()
      if (soft.signal.aborted) return
      recorder.totals.retries++
    }
  }

  const vu = async (index: number) => {
    while (index < wanted && !soft.signal.aborted) {
      await purchase()
      await think()
    }
  }

  // Crowd modes: one user per VU, in arrival order.
  const crowd = options.mode !== 'purchases'
  const users: LoadUser[] = []
  const journeys: JourneyContext = {
    options,
    call: (op, user, request) => {
      user.requests++
      return call(op, user.user_id, request)
    },
    pause: (ms) => sleep(ms, undefined, { signal: soft.signal }).catch(() => undefined),
    stopped: () => soft.signal.aborted,
    now: elapsed,
    retried: () => {
      recorder.totals.retries++
    },
  }
  const journey = options.mode === 'waiting-room' ? roomJourney : directJourney
  const arrive = async (index: number) => {
    const user = newUser(options.userIdMin + index, elapsed())
    users.push(user)
    recorder.totals.purchases++
    await journey(journeys, user)
  }

  let arrived = 0
  const adjustVus = () => {
    if (crowd) {
      for (; arrived < wanted; arrived++) {
        const i = arrived
        running.set(
          i,
          arrive(i).finally(() => running.delete(i)),
        )
      }
      return
    }
    for (let i = 0; i < wanted; i++) {
      if (running.has(i)) continue
      const loop = vu(i).finally(() => running.delete(i))
      running.set(i, loop)
    }
  }

  let closed = 0
  const closeSeconds = (upToMs: number) => {
    while ((closed + 1) * 1000 <= upToMs) {
      closed++
      // Not inside `onSecond?.(...)`: an optional call skips evaluating its argument.
      const second = recorder.closeSecond(closed, running.size)
      hooks.onSecond?.(second)
    }
  }

  let stopReason: LoadResult['stopReason'] = 'completed'
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = elapsed()
      closeSeconds(now)
      if (hard.signal.aborted) stopReason = 'aborted'
      else if (now >= endMs && !crowd) stopReason = endMs < stagesMs ? 'cap' : 'completed'
      else if (crowd && now >= options.maxDurationMs) stopReason = 'cap'
      else {
        // A crowd run goes on after its arrivals until its last user has left.
        wanted = crowd ? arrivalsBy(options.stages, now) : vusAt(options.stages, now)
        adjustVus()
        if (!(crowd && now >= stagesMs && running.size === 0)) return
      }
      clearInterval(timer)
      wanted = 0
      soft.abort()
      resolve()
    }
    const timer = setInterval(tick, TICK_MS)
    tick()
  })
  // Graceful: VUs finish their request in flight (bounded by timeoutMs).
  while (running.size > 0) {
    await Promise.allSettled([...running.values()])
    closeSeconds(elapsed())
  }
  const durationMs = elapsed()
  closeSeconds(durationMs)
  // The last, partial second, so that the series add up to the totals.
  if (durationMs > closed * 1000) {
    const last = recorder.closeSecond(closed + 1, 0)
    hooks.onSecond?.(last)
  }
  hooks.signal?.removeEventListener('abort', onAbort)
  await (hard.signal.aborted ? pool.destroy() : pool.close())

  const { series, latency } = recorder.finish(durationMs)
  return {
    version: LOAD_RESULT_VERSION,
    startedAt: new Date(startedAtMs).toISOString(),
    startedAtMs,
    durationMs: Math.round(durationMs),
    stopReason,
    options: {
      ...options,
      maxDurationMs: Number.isFinite(options.maxDurationMs) ? options.maxDurationMs : null,
      maxRetries: Number.isFinite(options.maxRetries) ? options.maxRetries : null,
    },
    totals: recorder.totals,
    users,
    latency,
    series,
    orders: recorder.orders,
    transportErrorSamples: recorder.errorSamples,
  }
}
