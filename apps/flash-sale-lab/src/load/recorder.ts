// Collects answers as they arrive and folds them into per-second buckets and running totals.
import { LatencySamples, percentile, summarise } from './latency.js'
import type { LoadOp, LoadOrder, LoadSecond, LoadSeries, LoadTotals } from './result.js'

const MAX_ERROR_SAMPLES = 20

interface Bucket {
  byStatus: Map<number, number>
  byOp: Map<string, number>
  transportErrors: number
  latencies: number[]
}

const emptyBucket = (): Bucket => ({
  byStatus: new Map(),
  byOp: new Map(),
  transportErrors: 0,
  latencies: [],
})
const round = (ms: number) => Math.round(ms * 1000) / 1000
const bump = (record: Record<string, number>, key: string) => {
  record[key] = (record[key] ?? 0) + 1
}

export class Recorder {
  readonly totals: LoadTotals = {
    requests: 0,
    answered: 0,
    byStatus: {},
    byErrorCode: {},
    transportErrors: {},
    purchases: 0,
    doubleClicks: 0,
    retries: 0,
    byOp: {},
    requestsPerSecond: 0,
  }
  readonly orders: LoadOrder[] = []
  readonly errorSamples: string[] = []
  readonly #all = new LatencySamples()
  readonly #series: LoadSeries = {
    t: [],
    vus: [],
    requests: [],
    byStatus: {},
    transportErrors: [],
    p50Ms: [],
    p99Ms: [],
    maxMs: [],
    byOp: {},
  }
  #bucket = emptyBucket()

  constructor(readonly recordOrders: boolean) {}

  sent(op: LoadOp = 'checkout'): void {
    this.totals.requests++
    bump(this.totals.byOp, op)
  }

  answer(
    status: number,
    latencyMs: number,
    errorCode: string | undefined,
    order: LoadOrder | undefined,
    op: LoadOp = 'checkout',
  ): void {
    this.totals.answered++
    this.#bucket.byOp.set(op, (this.#bucket.byOp.get(op) ?? 0) + 1)
    bump(this.totals.byStatus, String(status))
    if (errorCode !== undefined) bump(this.totals.byErrorCode, errorCode)
    if (order && this.recordOrders) this.orders.push(order)
    this.#all.add(latencyMs)
    this.#bucket.latencies.push(latencyMs)
    this.#bucket.byStatus.set(status, (this.#bucket.byStatus.get(status) ?? 0) + 1)
  }

  transportError(kind: string, message: string): void {
    bump(this.totals.transportErrors, kind)
    this.#bucket.transportErrors++
    if (this.errorSamples.length < MAX_ERROR_SAMPLES) this.errorSamples.push(`${kind}: ${message}`)
  }

  /** Closes second `t` (1-based); `vus` is the running VU count at its end. */
  closeSecond(t: number, vus: number): LoadSecond {
    const b = this.#bucket
    this.#bucket = emptyBucket()
    const s = this.#series
    const index = s.t.length
    s.t.push(t)
    s.vus.push(vus)
    let requests = 0
    for (const [status, n] of b.byStatus) {
      const key = String(status)
      // A status first seen now gets zeros for the seconds before, so every column has one length.
      const column = (s.byStatus[key] ??= new Array<number>(index).fill(0))
      column.push(n)
      requests += n
    }
    for (const column of Object.values(s.byStatus)) if (column.length === index) column.push(0)
    const byOp = (s.byOp ??= {})
    for (const [op, n] of b.byOp) (byOp[op] ??= new Array<number>(index).fill(0)).push(n)
    for (const column of Object.values(byOp)) if (column.length === index) column.push(0)
    s.requests.push(requests)
    s.transportErrors.push(b.transportErrors)
    const sorted = Float64Array.from(b.latencies).sort()
    const some = sorted.length > 0
    const p50 = some ? round(percentile(sorted, 50)) : null
    const p99 = some ? round(percentile(sorted, 99)) : null
    const max = some ? round(sorted[sorted.length - 1]!) : null
    s.p50Ms.push(p50)
    s.p99Ms.push(p99)
    s.maxMs.push(max)
    return {
      t,
      vus,
      requests,
      byStatus: Object.fromEntries([...b.byStatus].map(([k, v]) => [String(k), v])),
      transportErrors: b.transportErrors,
      p50Ms: p50,
      p99Ms: p99,
      maxMs: max,
      totals: this.totals,
    }
  }

  finish(durationMs: number) {
    this.totals.requestsPerSecond = durationMs > 0 ? round((this.totals.answered * 1000) / durationMs) : 0
    return { series: this.#series, latency: summarise(this.#all.sorted()) }
  }
}
