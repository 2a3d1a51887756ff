// Options of one load run, their defaults in one frozen table, and the one resolver that checks
// them. Defaults follow the source articles' k6 scenario (product 9921, users below 100000,
// sleep(0.1), 30s→100, 1m→500, 30s→0).
import { LoadOptionError } from './errors.js'
import { peakVus, type Stage, totalDurationMs, validateStages } from './stages.js'

/**
 * What each virtual user does.
 * - 'purchases': k6's loop: a purchase by a random user id, the think time, again.
 * - 'crowd': each VU is one user, `userIdMin + its index` (so two runs with the same stages have
 *   the same users arriving in the same order), who checks out until a final answer and leaves.
 * - 'waiting-room': the same users join the sale's waiting room, poll it, and check out with its
 *   ticket once admitted, as its page does.
 * In both crowd modes the stages give the arrivals: the highest target is the crowd's size, a
 * ramp down removes nobody, and the run lasts until every user has left (or maxDurationMs).
 */
export type LoadMode = 'purchases' | 'crowd' | 'waiting-room'
export const LOAD_MODES: readonly LoadMode[] = Object.freeze(['purchases', 'crowd', 'waiting-room'])

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
  /** See LoadMode. @defaultValue 'purchases' */
  mode?: LoadMode
  /**
   * 'waiting-room': the pause between polls is the room's `poll_after_seconds`, kept within
   * [min, max] ms (the page polls every 2–10 s; a test or a short demo wants less).
   * @defaultValue [1000, 10000]
   */
  pollIntervalMs?: [number, number]
  /**
   * Crowd modes: a user who has no final answer this long after arriving gives up (outcome
   * 'gave_up'); it also bounds a run whose service never answers. @defaultValue 120000
   */
  patienceMs?: number
  /**
   * 'crowd' mode, a sale paid later (`payment: "hold"`): what a user does with a checkout answered
   * `reserved` with `pay_by`: pays it (`payRatio` of them), cancels it (`cancelRatio`), or leaves
   * it to expire (the rest), after a pause uniform in `delayMs`. A pay or cancel answered 409
   * ORDER_PENDING (not in SQL yet), 429, 503 or not at all is sent again after retryDelayMs (or the
   * think time), within patienceMs. @defaultValue null (nothing after the checkout)
   */
  afterReserved?: AfterReserved | null
}

export interface AfterReserved {
  payRatio: number
  cancelRatio: number
  /** [min, max] ms between the reservation's answer and the pay or cancel. */
  delayMs: [number, number]
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
  mode: 'purchases',
  pollIntervalMs: Object.freeze([1_000, 10_000]) as [number, number],
  patienceMs: 120_000,
  afterReserved: null,
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

/** [min, max] ms with floor <= min <= max, both finite. */
function checkRange(name: string, value: unknown, floor: number): void {
  const [min, max] = Array.isArray(value) ? value : []
  if (
    !Array.isArray(value) ||
    value.length !== 2 ||
    !(typeof min === 'number' && Number.isFinite(min) && min >= floor) ||
    !(typeof max === 'number' && Number.isFinite(max) && max >= min)
  )
    throw new LoadOptionError(
      name,
      `expected [min, max] ms with ${floor} <= min <= max, got ${JSON.stringify(value)}`,
    )
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
  if (o.retryDelayMs !== null) checkRange('retryDelayMs', o.retryDelayMs, 0)
  if (!LOAD_MODES.includes(o.mode))
    throw new LoadOptionError('mode', `expected ${LOAD_MODES.join(', ')}, got '${o.mode}'`)
  checkRange('pollIntervalMs', o.pollIntervalMs, 1)
  checkMs('patienceMs', o.patienceMs, 1)
  if (o.mode !== 'purchases' && o.userIdMax - o.userIdMin + 1 < peakVus(stages)) {
    throw new LoadOptionError(
      'userIdMax',
      `a crowd of ${peakVus(stages)} users needs as many user ids, got ${o.userIdMin}..${o.userIdMax}`,
    )
  }
  if (o.afterReserved !== null) {
    if (o.mode !== 'crowd') throw new LoadOptionError('afterReserved', `needs mode 'crowd', got '${o.mode}'`)
    const { payRatio, cancelRatio, delayMs } = o.afterReserved
    checkRatio('afterReserved.payRatio', payRatio)
    checkRatio('afterReserved.cancelRatio', cancelRatio)
    if (payRatio + cancelRatio > 1)
      throw new LoadOptionError(
        'afterReserved',
        `payRatio + cancelRatio must be at most 1, got ${payRatio} + ${cancelRatio}`,
      )
    checkRange('afterReserved.delayMs', delayMs, 0)
  }
  checkRatio('doubleClickRatio', o.doubleClickRatio)
  checkMs('maxDurationMs', o.maxDurationMs, 1, true)
  checkMs('timeoutMs', o.timeoutMs, 1)
  if (o.maxDurationMs === Number.POSITIVE_INFINITY && totalDurationMs(stages) === 0) {
    throw new LoadOptionError('stages', 'the stages last 0 ms; give them a duration or set maxDurationMs')
  }
  return { ...o, url: url.origin + url.pathname.replace(/\/+$/, ''), stages }
}
