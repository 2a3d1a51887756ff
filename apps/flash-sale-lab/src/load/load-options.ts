// Options of one load run, their defaults in one frozen table, and the one resolver that checks
// them. Defaults follow the source articles' k6 scenario (product 9921, users below 100000,
// sleep(0.1), 30s→100, 1m→500, 30s→0).
import { LoadOptionError } from './errors.js'
import { type Stage, totalDurationMs, validateStages } from './stages.js'

export interface LoadOptions {
  /** Base URL of the service; requests go to `${url}/v1/checkout`. @defaultValue 'http://127.0.0.1:8080' */
  url?: string
  /** @defaultValue 30s→100, 1m→500, 30s→0 */
  stages?: Stage[]
  /** @defaultValue 9921 */
  productId?: number
  /** Each purchase picks a uniformly random user id in [userIdMin, userIdMax]. @defaultValue 1 */
  userIdMin?: number
  /** @defaultValue 99999 */
  userIdMax?: number
  /** Pause of each VU between purchases (k6 `sleep(0.1)`). @defaultValue 100 */
  thinkTimeMs?: number
  /**
   * Share of users who, answered 429 BUSY or 503 UNAVAILABLE or not answered at all (a timeout),
   * retry the same purchase (same user, same Idempotency-Key) after the think time (or
   * retryDelayMs), up to maxRetries times. @defaultValue 0.5
   */
  repeatRatio?: number
  /** Infinity: until a final answer (the retry storm of a sold-out sale). @defaultValue 3 */
  maxRetries?: number
  /**
   * The pause before a retry, uniform in [min, max] ms, instead of the think time: `[100, 300]`
   * is a crowd clicking again as fast as a person does. @defaultValue null (the think time)
   */
  retryDelayMs?: [number, number] | null
  /** Share of purchases sent twice at once with the same Idempotency-Key (a double click). @defaultValue 0.05 */
  doubleClickRatio?: number
  /** Send an Idempotency-Key (a UUID per purchase). Off: double clicks carry no key. @defaultValue true */
  idempotencyKeys?: boolean
  /** Hard cap on the run; in-flight requests may still finish within timeoutMs. @defaultValue Infinity (the stages' length) */
  maxDurationMs?: number
  /** A request without a full answer after this long counts as a 'timeout' transport error. @defaultValue 5000 */
  timeoutMs?: number
  /** Keep the order ids of successful (200/202) answers in the result. @defaultValue true */
  recordOrders?: boolean
}

export const DEFAULT_STAGES: readonly Stage[] = Object.freeze([
  Object.freeze({ durationMs: 30_000, target: 100 }),
  Object.freeze({ durationMs: 60_000, target: 500 }),
  Object.freeze({ durationMs: 30_000, target: 0 }),
])

export const DEFAULT_LOAD_OPTIONS = Object.freeze({
  url: 'http://127.0.0.1:8080',
  stages: DEFAULT_STAGES as Stage[],
  productId: 9921,
  userIdMin: 1,
  userIdMax: 99_999,
  thinkTimeMs: 100,
  repeatRatio: 0.5,
  maxRetries: 3,
  retryDelayMs: null,
  doubleClickRatio: 0.05,
  idempotencyKeys: true,
  maxDurationMs: Number.POSITIVE_INFINITY,
  timeoutMs: 5_000,
  recordOrders: true,
} satisfies Required<LoadOptions>)

export type ResolvedLoadOptions = Required<LoadOptions>

function checkRatio(name: string, value: number): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
    throw new LoadOptionError(name, `expected a ratio between 0 and 1, got ${value}`)
  }
  return value
}

function checkInt(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new LoadOptionError(name, `expected a whole number >= ${min}, got ${value}`)
  }
  return value
}

function checkMs(name: string, value: number, min: number, allowInfinity = false): number {
  if (
    typeof value !== 'number' ||
    Number.isNaN(value) ||
    value < min ||
    (!allowInfinity && !Number.isFinite(value))
  ) {
    throw new LoadOptionError(name, `expected a number of ms >= ${min}, got ${value}`)
  }
  return value
}

export function resolveLoadOptions(input: LoadOptions = {}): ResolvedLoadOptions {
  const o = { ...DEFAULT_LOAD_OPTIONS, ...input }
  let url: URL
  try {
    url = new URL(o.url)
  } catch {
    throw new LoadOptionError('url', `expected an absolute http(s) URL, got '${o.url}'`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new LoadOptionError('url', `expected http: or https:, got '${url.protocol}'`)
  }
  const stages = validateStages(o.stages)
  checkInt('productId', o.productId, 1)
  checkInt('userIdMin', o.userIdMin, 0)
  checkInt('userIdMax', o.userIdMax, o.userIdMin)
  checkMs('thinkTimeMs', o.thinkTimeMs, 0)
  checkRatio('repeatRatio', o.repeatRatio)
  if (o.maxRetries !== Number.POSITIVE_INFINITY) checkInt('maxRetries', o.maxRetries, 0)
  if (o.retryDelayMs !== null) {
    const [min, max] = Array.isArray(o.retryDelayMs) ? o.retryDelayMs : []
    if (
      o.retryDelayMs.length !== 2 ||
      !(typeof min === 'number' && min >= 0) ||
      !(typeof max === 'number' && max >= min)
    )
      throw new LoadOptionError(
        'retryDelayMs',
        `expected [min, max] ms with 0 <= min <= max, got ${JSON.stringify(o.retryDelayMs)}`,
      )
  }
  checkRatio('doubleClickRatio', o.doubleClickRatio)
  checkMs('maxDurationMs', o.maxDurationMs, 1, true)
  checkMs('timeoutMs', o.timeoutMs, 1)
  if (o.maxDurationMs === Number.POSITIVE_INFINITY && totalDurationMs(stages) === 0) {
    throw new LoadOptionError('stages', 'the stages last 0 ms; give them a duration or set maxDurationMs')
  }
  return { ...o, url: url.origin + url.pathname.replace(/\/+$/, ''), stages }
}
