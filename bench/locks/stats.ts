/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when there are none. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1]!
}

export interface Spread {
  median: number
  min: number
  max: number
}

/** Median with min–max over the per-round values of one metric. */
export function spread(values: readonly number[]): Spread {
  const finite = values.filter(Number.isFinite)
  if (finite.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN }
  const sorted = [...finite].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! }
}
