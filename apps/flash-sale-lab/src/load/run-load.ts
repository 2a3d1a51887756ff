// The load generator: k6-style ramping virtual users on undici's Pool (keep-alive connections,
// one request in flight per connection), each VU a loop of purchases by random users.
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
import { type LoadOptions, type ResolvedLoadOptions, resolveLoadOptions } from './load-options.js'
import { Recorder } from './recorder.js'
import { LOAD_RESULT_VERSION, type LoadOrder, type LoadResult, type LoadSecond } from './result.js'
import { peakVus, totalDurationMs, vusAt } from './stages.js'

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
  const path = (url.pathname === '/' ? '' : url.pathname) + CHECKOUT_PATH
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

  const send = async (userId: number, key: string | undefined): Promise<number | undefined> => {
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (key !== undefined) headers['idempotency-key'] = key
    recorder.sent()
    const start = performance.now()
    try {
      const res = await pool.request({
        path,
        method: 'POST',
        headers,
        body: JSON.stringify({ product_id: options.productId, user_id: userId }),
        signal: hard.signal,
        // Per phase, not in total: a slow body after slow headers can take up to twice as long.
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      })
      const body = parseJson(await res.body.text()) as Record<string, unknown> | undefined
      const latencyMs = performance.now() - start
      let order: LoadOrder | undefined
      let errorCode: string | undefined
      if ((res.statusCode === 200 || res.statusCode === 202) && typeof body?.order_id === 'string') {
        order = { order_id: body.order_id, user_id: userId, status: res.statusCode }
      } else if (res.statusCode >= 300) {
        const code = (body?.error as { code?: unknown } | undefined)?.code
        errorCode = typeof code === 'string' ? code : `HTTP_${res.statusCode}`
      }
      recorder.answer(res.statusCode, latencyMs, errorCode, order)
      return res.statusCode
    } catch (err) {
      const kind = classifyTransportError(err, hard.signal.aborted)
      recorder.transportError(kind, err instanceof Error ? err.message : String(err))
      return undefined
    }
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

  const adjustVus = () => {
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
      else if (now >= endMs) stopReason = endMs < stagesMs ? 'cap' : 'completed'
      else {
        wanted = vusAt(options.stages, now)
        adjustVus()
        return
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
    latency,
    series,
    orders: recorder.orders,
    transportErrorSamples: recorder.errorSamples,
  }
}
