/**
 * The one options validator of kunci: every resolver (lock-options.ts, cache-options.ts,
 * cluster/scan.ts, RedisLock's waitForReplicas) checks its values with these, so a bad value
 * throws the same `InvalidOptionError`, named after the option, with the same wording,
 * whichever part of the library it was given to. Unbounded is `Infinity` where allowed.
 */
import { InvalidOptionError } from './errors.js'

/** Redis accepts PX up to 2^63 ms, but sums of durations must stay exact in a JS number. */
export const MAX_MS = Number.MAX_SAFE_INTEGER / 4

export interface NumberRule {
  /** Smallest allowed value. @defaultValue -Infinity */
  readonly min?: number
  /** Largest allowed value. @defaultValue Number.MAX_SAFE_INTEGER for integers, else finite */
  readonly max?: number
  /** The value must be below this (exclusive), e.g. a fraction below 1. */
  readonly below?: number
  /** `Infinity` is allowed (meaning: no bound). @defaultValue false */
  readonly infinity?: boolean
  /** Appended to the message: what the value means, e.g. '0 disables L1'. */
  readonly hint?: string
}

function describe(kind: string, rule: NumberRule): string {
  const parts: string[] = []
  if (rule.min !== undefined && rule.min > Number.NEGATIVE_INFINITY) parts.push(`>= ${rule.min}`)
  if (rule.max !== undefined && rule.max < Number.MAX_SAFE_INTEGER) parts.push(`<= ${rule.max}`)
  if (rule.below !== undefined) parts.push(`below ${rule.below}`)
  const range = parts.length > 0 ? ` ${parts.join(' and ')}` : ''
  const inf = rule.infinity ? ' (or Infinity for no bound)' : ''
  const hint = rule.hint ? `; ${rule.hint}` : ''
  return `expected ${kind}${range}${inf}${hint}`
}

function fail(name: string, expected: string, v: unknown): never {
  throw new InvalidOptionError(
    name,
    `${expected}, got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`,
  )
}

/** A finite number (or Infinity if allowed) within the rule. */
export function number(name: string, v: unknown, rule: NumberRule = {}): number {
  if (typeof v === 'number' && !Number.isNaN(v)) {
    if (v === Number.POSITIVE_INFINITY) {
      if (rule.infinity) return v
    } else if (
      Number.isFinite(v) &&
      v >= (rule.min ?? Number.NEGATIVE_INFINITY) &&
      v <= (rule.max ?? Number.MAX_VALUE) &&
      (rule.below === undefined || v < rule.below)
    ) {
      return v
    }
  }
  return fail(name, describe('a number', rule), v)
}

/** An integer (or Infinity if allowed) within the rule. */
export function integer(name: string, v: unknown, rule: NumberRule = {}): number {
  if (typeof v === 'number') {
    if (v === Number.POSITIVE_INFINITY) {
      if (rule.infinity) return v
    } else if (
      Number.isInteger(v) &&
      v >= (rule.min ?? Number.MIN_SAFE_INTEGER) &&
      v <= (rule.max ?? Number.MAX_SAFE_INTEGER) &&
      (rule.below === undefined || v < rule.below)
    ) {
      return v
    }
  }
  return fail(name, describe('an integer', rule), v)
}

/** A number of milliseconds: an integer from `min` (default 0) to MAX_MS, or Infinity if allowed. */
export function milliseconds(name: string, v: unknown, rule: NumberRule = {}): number {
  return integer(name, v, { min: 0, max: MAX_MS, ...rule })
}

export function boolean(name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') fail(name, 'expected true or false', v)
  return v
}

/** One of `values` (compared with ===). */
export function oneOf<T extends string>(name: string, v: unknown, values: readonly T[]): T {
  if (!values.includes(v as T)) fail(name, `expected one of ${values.map((x) => `'${x}'`).join(', ')}`, v)
  return v as T
}

export interface StringRule {
  /** Must not be ''. @defaultValue false */
  readonly nonEmpty?: boolean
  /** Characters it must not contain, e.g. /[{}]/ for a key prefix. */
  readonly forbidden?: RegExp
  readonly hint?: string
}

export function string(name: string, v: unknown, rule: StringRule = {}): string {
  if (typeof v !== 'string' || (rule.nonEmpty && v.length === 0) || rule.forbidden?.test(v)) {
    const what = rule.nonEmpty ? 'a non-empty string' : 'a string'
    fail(name, `expected ${what}${rule.hint ? `; ${rule.hint}` : ''}`, v)
  }
  return v
}

// biome-ignore lint/suspicious/noExplicitAny: any function signature is acceptable here; the caller types it
export function func<F extends (...args: any[]) => unknown>(name: string, v: unknown, hint?: string): F {
  if (typeof v !== 'function') fail(name, `expected a function${hint ? ` ${hint}` : ''}`, v)
  return v as F
}

/** `undefined` or an AbortSignal. */
export function signal(name: string, v: unknown): AbortSignal | undefined {
  if (v !== undefined && !(v instanceof AbortSignal)) fail(name, 'expected an AbortSignal', v)
  return v as AbortSignal | undefined
}

/** An options object (not null, not an array). */
export function object<T extends object>(name: string, v: unknown, hint: string): T {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(name, `expected ${hint}`, v)
  return v as T
}
