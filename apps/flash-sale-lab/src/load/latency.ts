// Latency percentiles are exact: every sample is kept (a Float64Array that doubles as it grows;
// a million requests are 8 MB) and sorted once. Nearest-rank definition: pX is the smallest
// sample such that at least X % of the samples are <= it, so p100 is the max and every reported
// value is a latency that was really observed. HDR-style bucketing would save memory we do not
// need at demo scale and would round the figures the tests compare with the server's.

export interface LatencySummary {
  count: number
  minMs: number
  meanMs: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  p999Ms: number
  maxMs: number
}

export class LatencySamples {
  #values = new Float64Array(1024)
  #count = 0

  get count(): number {
    return this.#count
  }

  add(ms: number): void {
    if (this.#count === this.#values.length) {
      const grown = new Float64Array(this.#values.length * 2)
      grown.set(this.#values)
      this.#values = grown
    }
    this.#values[this.#count++] = ms
  }

  /** A sorted copy; the samples stay as recorded. */
  sorted(): Float64Array {
    return this.#values.slice(0, this.#count).sort()
  }

  summary(): LatencySummary {
    return summarise(this.sorted())
  }
}

/** Nearest-rank percentile of ascending `sorted`; NaN-free: 0 when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[Math.min(rank, sorted.length) - 1]!
}

const round = (ms: number) => Math.round(ms * 1000) / 1000

export function summarise(sorted: ArrayLike<number>): LatencySummary {
  let sum = 0
  for (let i = 0; i < sorted.length; i++) sum += sorted[i]!
  return {
    count: sorted.length,
    minMs: round(sorted.length ? sorted[0]! : 0),
    meanMs: round(sorted.length ? sum / sorted.length : 0),
    p50Ms: round(percentile(sorted, 50)),
    p90Ms: round(percentile(sorted, 90)),
    p99Ms: round(percentile(sorted, 99)),
    p999Ms: round(percentile(sorted, 99.9)),
    maxMs: round(sorted.length ? sorted[sorted.length - 1]! : 0),
  }
}
