/** One period during which a worker used the resource under the lock. */
export interface Hold {
  readonly worker: string
  readonly fence: number
  /** performance.now() when the worker got the lock (all pods share this process's clock). */
  readonly start: number
  /** When it stopped using the resource, capped at the validity it was granted. */
  readonly end: number
}

export interface HistoryVerdict {
  /** Pairs of holds of the resource that overlapped in time: mutual exclusion broken. */
  readonly overlaps: readonly [Hold, Hold][]
  /** Pairs of successive holds whose fences did not increase. */
  readonly fenceInversions: readonly [Hold, Hold][]
}

/**
 * Records every hold and checks the two properties the lock promises: holds of one resource
 * never overlap, and the fencing token increases from each holder to the next.
 */
export class History {
  readonly holds: Hold[] = []

  add(hold: Hold): void {
    this.holds.push(hold)
  }

  check(): HistoryVerdict {
    const sorted = [...this.holds].sort((a, b) => a.start - b.start)
    const overlaps: [Hold, Hold][] = []
    const fenceInversions: [Hold, Hold][] = []
    // The hold that ends last so far: any later start before its end overlaps it.
    let latest: Hold | undefined
    let previous: Hold | undefined
    for (const h of sorted) {
      if (latest && h.start < latest.end) overlaps.push([latest, h])
      if (previous && h.fence <= previous.fence) fenceInversions.push([previous, h])
      if (!latest || h.end > latest.end) latest = h
      previous = h
    }
    return { overlaps, fenceInversions }
  }
}
