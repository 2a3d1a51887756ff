/**
 * Records every hold of a lock as the holder saw it and checks the two safety properties:
 *  1. holds of one resource never overlap within their validity, and
 *  2. fencing tokens strictly increase in grant order.
 *
 * A hold's interval is [grantedAt, min(releasedAt, grantedAt + validity)] on this process's
 * monotonic clock: the time during which the holder believed it had exclusive access. The
 * workers of a test run in one process (as separate Redlock instances with their own
 * connections, like pods), so one clock orders every event.
 */
export interface Hold {
  readonly resource: string
  readonly fence: number
  readonly owner: string
  readonly start: number
  end: number
}

export interface Violation {
  readonly kind: 'overlap' | 'fence-order'
  readonly a: Hold
  readonly b: Hold
}

export class History {
  readonly holds: Hold[] = []

  /** Call right after acquire resolves; returns a function to call right before release. */
  begin(resource: string, fence: number, owner: string, validityMs: number): (at?: number) => void {
    const start = performance.now()
    const hold: Hold = { resource, fence, owner, start, end: start + validityMs }
    this.holds.push(hold)
    return (at = performance.now()) => {
      if (at < hold.end) hold.end = at
    }
  }

  violations(): Violation[] {
    const out: Violation[] = []
    const byResource = new Map<string, Hold[]>()
    for (const h of this.holds) {
      const list = byResource.get(h.resource)
      if (list) list.push(h)
      else byResource.set(h.resource, [h])
    }
    for (const list of byResource.values()) {
      list.sort((x, y) => x.start - y.start)
      let latestEnd: Hold | undefined
      for (let i = 0; i < list.length; i++) {
        const h = list[i]!
        if (latestEnd && h.start < latestEnd.end) out.push({ kind: 'overlap', a: latestEnd, b: h })
        if (!latestEnd || h.end > latestEnd.end) latestEnd = h
        const prev = list[i - 1]
        if (prev && h.fence <= prev.fence) out.push({ kind: 'fence-order', a: prev, b: h })
      }
    }
    return out
  }
}
