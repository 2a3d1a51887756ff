/** ⌊N/2⌋+1: any two majorities of the same N nodes share at least one node. */
export function quorumOf(n: number): number {
  return (n >> 1) + 1
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
 * One timer per call, not per node. Requests still in flight at the end count as timed out;
 * they keep running, and the caller cleans up after them.
 */
export function gather<T>(
  requests: readonly (Promise<T> | undefined)[],
  timeoutMs: number,
  enough?: (outcomes: readonly Outcome<T>[]) => boolean,
): Promise<Outcome<T>[]> {
  const outcomes: Outcome<T>[] = new Array(requests.length).fill(undefined)
  let pending = 0
  for (const r of requests) if (r) pending++
  if (pending === 0) return Promise.resolve(outcomes)
  return new Promise((resolve) => {
    let done = false
    const finish = (timedOut: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      const rest = timedOut ? TIMED_OUT : UNDECIDED
      for (let i = 0; i < requests.length; i++) if (requests[i] && !outcomes[i]) outcomes[i] = rest
      resolve(outcomes)
    }
    const timer = setTimeout(finish, timeoutMs, true)
    requests.forEach((r, i) => {
      if (!r) return
      r.then(
        (value) => {
          if (done) return
          outcomes[i] = { ok: true, value }
          if (--pending === 0 || enough?.(outcomes)) finish(false)
        },
        (error: Error) => {
          if (done) return
          outcomes[i] = { ok: false, error, timedOut: false }
          if (--pending === 0 || enough?.(outcomes)) finish(false)
        },
      )
    })
  })
}
