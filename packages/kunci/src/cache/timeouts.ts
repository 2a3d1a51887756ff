/**
 * Soft and hard timeouts around a loader that keeps running after the caller stops waiting:
 * its result is still written to the cache for the next reader, so giving up early costs the
 * caller nothing but freshness.
 */

export type Settled<T> =
  | { readonly kind: 'value'; readonly value: T }
  | { readonly kind: 'error'; readonly error: unknown }
  | { readonly kind: 'soft' }
  | { readonly kind: 'hard' }

/**
 * Resolves with whichever comes first: the work's outcome, the soft timeout (only when
 * `softMs` is finite) or the hard deadline (an absolute time; Infinity for none). Never
 * rejects. `late` receives the outcome of work that settles after a timeout won.
 */
export function settleWithin<T>(
  work: Promise<T>,
  softMs: number,
  deadline: number,
  late: (outcome: Settled<T>) => void,
): Promise<Settled<T>> {
  return new Promise((resolve) => {
    let done = false
    let soft: NodeJS.Timeout | undefined
    let hard: NodeJS.Timeout | undefined
    const finish = (outcome: Settled<T>): void => {
      if (done) {
        if (outcome.kind === 'value' || outcome.kind === 'error') late(outcome)
        return
      }
      done = true
      clearTimeout(soft)
      clearTimeout(hard)
      resolve(outcome)
    }
    if (Number.isFinite(softMs)) soft = setTimeout(() => finish({ kind: 'soft' }), softMs)
    if (Number.isFinite(deadline))
      hard = setTimeout(() => finish({ kind: 'hard' }), Math.max(0, deadline - Date.now()))
    work.then(
      (value) => finish({ kind: 'value', value }),
      (error: unknown) => finish({ kind: 'error', error }),
    )
  })
}

/** Resolves after `ms`, or earlier when `wake` resolves. */
export function sleepUnless(wake: Promise<void>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    void wake.then(() => {
      clearTimeout(timer)
      resolve()
    })
  })
}
