/**
 * Polling for a condition, for tests and demos that drive real servers: wait on a condition
 * with a generous deadline instead of a fixed sleep. The one copy for kunci's and topology's
 * tests (and anyone else's).
 */

export interface WaitOptions {
  /** Give up after this long, in ms. @defaultValue 15000 (the machine may be shared and loaded) */
  readonly timeoutMs?: number
  /** Pause between checks, in ms. @defaultValue 20 */
  readonly intervalMs?: number
}

export const DEFAULT_WAIT_OPTIONS = Object.freeze({
  timeoutMs: 15_000,
  intervalMs: 20,
} satisfies Required<WaitOptions>)

function resolveWait(options: WaitOptions | number | undefined): Required<WaitOptions> {
  const o = typeof options === 'number' ? { timeoutMs: options } : (options ?? {})
  const timeoutMs = o.timeoutMs ?? DEFAULT_WAIT_OPTIONS.timeoutMs
  const intervalMs = o.intervalMs ?? DEFAULT_WAIT_OPTIONS.intervalMs
  if (!(timeoutMs >= 0) || !(intervalMs >= 0)) {
    throw new RangeError(`timeoutMs and intervalMs must be >= 0, got ${timeoutMs} and ${intervalMs}`)
  }
  return { timeoutMs, intervalMs }
}

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Resolves once `check` returns true (checked at once, then every intervalMs); throws an Error
 * naming `what` when timeoutMs passes first, so a test fails with a reason instead of hanging.
 * A number for `options` is the time-out.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  options?: WaitOptions | number,
): Promise<void> {
  const { timeoutMs, intervalMs } = resolveWait(options)
  const end = performance.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (performance.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await pause(intervalMs)
  }
}

/**
 * Runs `assertion` until it stops throwing and returns its result; rethrows its last error
 * when timeoutMs passes first. For effects that follow a decision elsewhere (the last nodes of
 * a quorum answer after it was reached).
 */
export async function eventually<T>(
  assertion: () => T | Promise<T>,
  options?: WaitOptions | number,
): Promise<T> {
  const { timeoutMs, intervalMs } = resolveWait(options)
  const end = performance.now() + timeoutMs
  for (;;) {
    try {
      return await assertion()
    } catch (err) {
      if (performance.now() > end) throw err
      await pause(intervalMs)
    }
  }
}

/**
 * Reads until `accept(value)` holds and returns that value (checked at once, then every
 * intervalMs); a read that throws is retried. When timeoutMs passes first, throws an Error naming
 * `what` and the last value or error seen, so a test says what it saw instead of hanging.
 */
export async function readUntil<T, S extends T>(
  read: () => T | Promise<T>,
  accept: (value: T) => value is S,
  what: string,
  options?: WaitOptions | number,
): Promise<S>
export async function readUntil<T>(
  read: () => T | Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  options?: WaitOptions | number,
): Promise<T>
export async function readUntil<T>(
  read: () => T | Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  options?: WaitOptions | number,
): Promise<T> {
  const { timeoutMs, intervalMs } = resolveWait(options)
  const end = performance.now() + timeoutMs
  let last: { value: T } | { error: unknown } | undefined
  for (;;) {
    try {
      const value = await read()
      if (accept(value)) return value
      last = { value }
    } catch (error) {
      last = { error }
    }
    if (performance.now() > end) {
      const seen =
        last === undefined ? 'nothing' : 'value' in last ? JSON.stringify(last.value) : String(last.error)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${seen?.slice(0, 500)}`,
      )
    }
    await pause(intervalMs)
  }
}

/** `readUntil` for a read that answers undefined until it has something: returns the first value. */
export function readDefined<T>(
  read: () => T | undefined | Promise<T | undefined>,
  what: string,
  options?: WaitOptions | number,
): Promise<T> {
  return readUntil(read, (v): v is T => v !== undefined, what, options)
}
