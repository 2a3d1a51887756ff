import { describe, expect, it } from 'vitest'
import {
  DEFAULT_SCAN_OPTIONS,
  escapeGlob,
  resolveDeleteByPatternOptions,
  resolveScanOptions,
} from '../../src/cluster/scan.js'
import { InvalidOptionError } from '../../src/errors.js'

function optionError(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError)
    return (err as InvalidOptionError).option
  }
  throw new Error('expected InvalidOptionError')
}

describe('escapeGlob', () => {
  it('escapes every glob metacharacter and nothing else', () => {
    expect(escapeGlob('user[1]*')).toBe('user\\[1\\]\\*')
    expect(escapeGlob('a?b\\c')).toBe('a\\?b\\\\c')
    expect(escapeGlob('plain:prefix-{tag}^!')).toBe('plain:prefix-{tag}^!')
    expect(escapeGlob('')).toBe('')
  })
})

describe('resolveScanOptions', () => {
  it('fills in the defaults', () => {
    expect(resolveScanOptions()).toEqual({ ...DEFAULT_SCAN_OPTIONS, signal: undefined })
    expect(resolveScanOptions({ match: 'a*', count: 10, failoverTimeoutMs: Infinity })).toMatchObject({
      match: 'a*',
      count: 10,
      failoverTimeoutMs: Infinity,
    })
  })

  it('rejects out-of-range values with the option name', () => {
    expect(optionError(() => resolveScanOptions({ match: '' }))).toBe('match')
    expect(optionError(() => resolveScanOptions({ count: 0 }))).toBe('count')
    expect(optionError(() => resolveScanOptions({ count: 1.5 }))).toBe('count')
    expect(optionError(() => resolveScanOptions({ count: 1_000_000 }))).toBe('count')
    expect(optionError(() => resolveScanOptions({ failoverTimeoutMs: -1 }))).toBe('failoverTimeoutMs')
    expect(optionError(() => resolveScanOptions({ failoverTimeoutMs: Number.NaN }))).toBe('failoverTimeoutMs')
    expect(optionError(() => resolveScanOptions({ signal: {} as AbortSignal }))).toBe('signal')
  })

  it('requires an explicit match for deleteByPattern', () => {
    expect(optionError(() => resolveDeleteByPatternOptions({} as { match: string }))).toBe('match')
    expect(
      optionError(() => resolveDeleteByPatternOptions({ match: 'x', unlink: 1 as unknown as boolean })),
    ).toBe('unlink')
    expect(resolveDeleteByPatternOptions({ match: 'x*' })).toMatchObject({
      match: 'x*',
      unlink: true,
      count: 500,
    })
  })
})
