import { setTimeout as sleep } from 'node:timers/promises'

export interface EventuallyOptions {
  /** Give up after this long. @defaultValue 30000 */
  timeoutMs?: number
  /** Pause between attempts. @defaultValue 100 */
  intervalMs?: number
  /** Named in the error when the condition never held. */
  what?: string
}

/**
 * Calls `read` until `until(value)` holds and returns that value; a read that throws is retried.
 * Fails after `timeoutMs` with the last value or error in the message: the one way the service's
 * tests wait for a condition (never a fixed sleep).
 */
export async function eventually<T>(
  read: () => Promise<T>,
  until: (value: T) => boolean,
  options: EventuallyOptions = {},
): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100, what = 'the condition' } = options
  const deadline = Date.now() + timeoutMs
  let last: { value: T } | { error: unknown } | undefined
  for (;;) {
    try {
      const value = await read()
      if (until(value)) return value
      last = { value }
    } catch (error) {
      last = { error }
    }
    if (Date.now() >= deadline) {
      const seen =
        last && 'value' in last ? JSON.stringify(last.value) : String((last as { error: unknown })?.error)
      throw new Error(`${what} did not hold within ${timeoutMs} ms; last seen: ${seen?.slice(0, 500)}`)
    }
    await sleep(intervalMs)
  }
}
