// Closed loop: `connections` virtual users of the lab's load generator (runLoad, from
// @kunci/flash-sale-lab), each sending its next checkout as soon as the previous one is answered:
// no think time, no retries, no double clicks. The rate is whatever the target sustains; it is read
// from the per-second series after the warm-up, so the ramp and the last partial second do not
// dilute it.
import { type LoadResult, runLoad } from '@kunci/flash-sale-lab'

export interface ClosedLoopOptions {
  url: string
  connections: number
  warmupS: number
  seconds: number
  productId: number
  /** Each request's user is uniform in [userIdMin, userIdMax]. */
  userIdMin: number
  userIdMax: number
  /** A fresh Idempotency-Key per request (off: none, as the source articles' k6 scenario). */
  idempotencyKeys: boolean
  /** Called once the warm-up is over (when the measured seconds start): CPU and INFO snapshots. */
  onMeasureStart?: () => void
}

export interface ClosedLoopSample {
  /** HTTP answers per second over the measured seconds (every status). */
  requestsPerSecond: number
  /** 200/202 answers per second over the measured seconds (sales). */
  salesPerSecond: number
  measuredSeconds: number
  /** HTTP answers in the measured seconds (the denominator of the per-request costs). */
  measuredRequests: number
  byStatus: Record<string, number>
  byErrorCode: Record<string, number>
  transportErrors: Record<string, number>
  /** runLoad's exact percentiles over every answer of the run, warm-up included. */
  latency: LoadResult['latency']
}

export async function runClosedLoop(o: ClosedLoopOptions): Promise<ClosedLoopSample> {
  const timer = o.onMeasureStart ? setTimeout(o.onMeasureStart, o.warmupS * 1000) : undefined
  const result = await runLoad({
    url: o.url,
    stages: [
      { durationMs: o.warmupS * 1000, target: o.connections },
      { durationMs: o.seconds * 1000, target: o.connections },
    ],
    productId: o.productId,
    userIdMin: o.userIdMin,
    userIdMax: o.userIdMax,
    thinkTimeMs: 0,
    repeatRatio: 0,
    doubleClickRatio: 0,
    idempotencyKeys: o.idempotencyKeys,
    timeoutMs: 5_000,
    recordOrders: false,
  }).finally(() => clearTimeout(timer))
  const s = result.series
  let requests = 0
  let sales = 0
  let seconds = 0
  for (let i = 0; i < s.t.length; i++) {
    const t = s.t[i]!
    // Second t covers (t-1, t]: keep the whole seconds after the warm-up.
    if (t <= o.warmupS || t > o.warmupS + o.seconds) continue
    seconds++
    requests += s.requests[i]!
    sales += (s.byStatus['200']?.[i] ?? 0) + (s.byStatus['202']?.[i] ?? 0)
  }
  return {
    requestsPerSecond: seconds === 0 ? 0 : Math.round(requests / seconds),
    salesPerSecond: seconds === 0 ? 0 : Math.round(sales / seconds),
    measuredSeconds: seconds,
    measuredRequests: requests,
    byStatus: result.totals.byStatus,
    byErrorCode: result.totals.byErrorCode,
    transportErrors: result.totals.transportErrors,
    latency: result.latency,
  }
}
