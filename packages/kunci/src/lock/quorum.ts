/** ⌊N/2⌋+1: any two majorities of the same N nodes share at least one node. */
export function quorumOf(n: number): number {
  return (n >> 1) + 1
}

/**
 * Do `missing` nodes that answered without our token prove a lock gone? Only when more than
 * N − quorum did: then it cannot be on a quorum. Nodes that did not answer prove nothing (a
 * release under packet loss is unavailable, not lost).
 */
export function provenGone(missing: number, n: number, quorum: number): boolean {
  return missing > n - quorum
}

/** What a node did with one request within the time-out; `undefined` = not sent. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: Error; readonly timedOut: boolean; readonly undecided?: boolean }
  | undefined

const TIMED_OUT = Object.freeze({ ok: false as const, error: new Error('node time-out'), timedOut: true })
/** Still in flight when the outcome was already decided by the other nodes' answers. */
const UNDECIDED = Object.freeze({
  ok: false as const,
  error: new Error('no answer needed: the outcome was decided by the other nodes'),
  timedOut: false,
  undecided: true,
})

/**
 * Waits for the per-node requests until every one has settled, `enough` says the outcome is
 * decided (quorum reached or out of reach), or `timeoutMs` passes, whichever comes first.
 * Requests still in flight at the end count as timed out; they keep running, and the caller
 * cleans up after them; `late` sees the values of those that still succeed, through the
 * handlers already attached here. The time-outs of all calls share one timer (see `deadlines`).
 */
export function gather<T>(
  requests: readonly (Promise<T> | undefined)[],
  timeoutMs: number,
  enough?: (outcomes: readonly Outcome<T>[]) => boolean,
  late?: (node: number, value: T) => void,
): Promise<Outcome<T>[]> {
  const outcomes: Outcome<T>[] = new Array(requests.length).fill(undefined)
  let pending = 0
  for (const r of requests) if (r) pending++
  if (pending === 0) return Promise.resolve(outcomes)
  return new Promise((resolve) => {
    const entry: Deadline = { at: performance.now() + timeoutMs, done: false, expire: () => finish(true) }
    const finish = (timedOut: boolean) => {
      if (entry.done) return
      entry.done = true
      // The list keeps the entry until its sweep: let go of this call's requests and outcomes.
      entry.expire = NOOP
      const rest = timedOut ? TIMED_OUT : UNDECIDED
      for (let i = 0; i < requests.length; i++) if (requests[i] && !outcomes[i]) outcomes[i] = rest
      resolve(outcomes)
    }
    deadlines.add(entry)
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i]
      if (!r) continue
      r.then(
        (value) => {
          if (entry.done) {
            late?.(i, value)
            return
          }
          outcomes[i] = { ok: true, value }
          if (--pending === 0 || enough?.(outcomes)) finish(false)
        },
        (error: Error) => {
          if (entry.done) return
          outcomes[i] = { ok: false, error, timedOut: false }
          if (--pending === 0 || enough?.(outcomes)) finish(false)
        },
      )
    }
  })
}

interface Deadline {
  readonly at: number
  done: boolean
  expire: () => void
}

const NOOP = (): void => {}

/**
 * The time-outs of every pending gather, behind ONE timer. Almost every gather is decided long
 * before its time-out, and a timer per call cost ~8 µs per acquire+release at concurrency 1 in
 * a profile (at C=1 Node's list for that duration empties and is rebuilt on every call): here a
 * decided gather is only marked done. The timer sweeps at the earliest deadline but at least
 * every SWEEP_MS while anything is listed, so decided entries die young (a list kept for a whole
 * time-out period cost 18 % of throughput at C=64: old-generation garbage). Unref'd: the
 * requests' sockets keep the process alive while anything is in flight.
 */
const SWEEP_MS = 10

const deadlines = new (class DeadlineList {
  #entries: Deadline[] = []
  #timer: NodeJS.Timeout | undefined
  #armedAt = Number.POSITIVE_INFINITY

  add(d: Deadline): void {
    this.#entries.push(d)
    if (this.#timer === undefined || d.at < this.#armedAt) this.#arm(d.at)
  }

  #arm(at: number): void {
    if (this.#timer) clearTimeout(this.#timer)
    const now = performance.now()
    this.#armedAt = Math.min(at, now + SWEEP_MS)
    this.#timer = setTimeout(this.#sweep, Math.max(0, this.#armedAt - now))
    this.#timer.unref()
  }

  #sweep = (): void => {
    this.#timer = undefined
    this.#armedAt = Number.POSITIVE_INFINITY
    const now = performance.now()
    const keep: Deadline[] = []
    let next = Number.POSITIVE_INFINITY
    const due: Deadline[] = []
    for (const d of this.#entries) {
      if (d.done) continue
      if (d.at <= now) due.push(d)
      else {
        keep.push(d)
        if (d.at < next) next = d.at
      }
    }
    this.#entries = keep
    if (keep.length > 0) this.#arm(next)
    for (const d of due) d.expire()
  }
})()
