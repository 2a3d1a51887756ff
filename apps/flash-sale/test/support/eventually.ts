import { readUntil } from '@kunci/topology'

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
 * tests wait for a condition (never a fixed sleep). Topology's readUntil with these defaults.
 */
export function eventually<T>(
  read: () => Promise<T>,
  until: (value: T) => boolean,
  options: EventuallyOptions = {},
): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100, what = 'the condition' } = options
  return readUntil(read, until, what, { timeoutMs, intervalMs })
}
