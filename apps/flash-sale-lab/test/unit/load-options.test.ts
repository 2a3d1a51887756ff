import { describe, expect, it } from 'vitest'
import { parseLoadArgs } from '../../src/cli/load.js'
import { LoadOptionError } from '../../src/load/errors.js'
import { percentile, summarise } from '../../src/load/latency.js'
import { DEFAULT_LOAD_OPTIONS, resolveLoadOptions } from '../../src/load/load-options.js'
import { parseStages, totalDurationMs, vusAt } from '../../src/load/stages.js'

function optionOf(fn: () => unknown): string {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(LoadOptionError)
    expect((err as LoadOptionError).code).toBe('E_LOAD_INVALID_OPTION')
    return (err as LoadOptionError).option
  }
  return 'no error'
}

describe('stages', () => {
  it("parses k6's notation", () => {
    expect(parseStages('30s:100,1m:500,30s:0')).toEqual([
      { durationMs: 30_000, target: 100 },
      { durationMs: 60_000, target: 500 },
      { durationMs: 30_000, target: 0 },
    ])
    expect(totalDurationMs(parseStages('500ms:1, 1m30s:2'))).toBe(90_500)
  })

  it.each(['', '30s', '30s:-1', '30:100', 'x:1', '1s:1:2', '1s:1.5'])('rejects %j', (bad) => {
    expect(optionOf(() => parseStages(bad))).toBe('--stages')
  })

  it('ramps linearly from the previous target, then holds the last one', () => {
    const stages = parseStages('10s:100,10s:100,10s:0')
    expect(vusAt(stages, 0)).toBe(0)
    expect(vusAt(stages, 5_000)).toBe(50)
    expect(vusAt(stages, 9_999)).toBe(99)
    expect(vusAt(stages, 15_000)).toBe(100)
    expect(vusAt(stages, 25_000)).toBe(50)
    expect(vusAt(stages, 40_000)).toBe(0)
    expect(vusAt(parseStages('0s:7,1s:7'), 0)).toBe(7)
  })
})

describe('the retry storm (issue 13)', () => {
  it('retries until answered, 100–300 ms apart: --max-retries inf --retry-delay 100ms-300ms', () => {
    const { options } = parseLoadArgs([
      '--repeat',
      '1',
      '--max-retries',
      'inf',
      '--retry-delay',
      '100ms-300ms',
    ])
    expect(options).toMatchObject({
      repeatRatio: 1,
      maxRetries: Number.POSITIVE_INFINITY,
      retryDelayMs: [100, 300],
    })
    expect(resolveLoadOptions(options).maxRetries).toBe(Number.POSITIVE_INFINITY)
    expect(optionOf(() => parseLoadArgs(['--retry-delay', '100ms']))).toBe('--retry-delay')
    expect(optionOf(() => parseLoadArgs(['--retry-delay', 'fast-slow']))).toBe('--retry-delay')
  })
})

describe('resolveLoadOptions', () => {
  it('defaults to the articles’ k6 scenario', () => {
    const o = resolveLoadOptions()
    expect(o.url).toBe('http://127.0.0.1:8080')
    expect(o.productId).toBe(9921)
    expect(totalDurationMs(o.stages)).toBe(120_000)
    expect(Object.isFrozen(DEFAULT_LOAD_OPTIONS)).toBe(true)
  })

  it('names the bad option', () => {
    expect(optionOf(() => resolveLoadOptions({ url: 'not a url' }))).toBe('url')
    expect(optionOf(() => resolveLoadOptions({ url: 'ftp://x' }))).toBe('url')
    expect(optionOf(() => resolveLoadOptions({ repeatRatio: 1.5 }))).toBe('repeatRatio')
    expect(optionOf(() => resolveLoadOptions({ doubleClickRatio: -0.1 }))).toBe('doubleClickRatio')
    expect(optionOf(() => resolveLoadOptions({ userIdMin: 10, userIdMax: 5 }))).toBe('userIdMax')
    expect(optionOf(() => resolveLoadOptions({ timeoutMs: 0 }))).toBe('timeoutMs')
    expect(optionOf(() => resolveLoadOptions({ maxRetries: -1 }))).toBe('maxRetries')
    expect(optionOf(() => resolveLoadOptions({ retryDelayMs: [300, 100] }))).toBe('retryDelayMs')
    expect(optionOf(() => resolveLoadOptions({ retryDelayMs: [100] as unknown as [number, number] }))).toBe(
      'retryDelayMs',
    )
    expect(optionOf(() => resolveLoadOptions({ stages: [] }))).toBe('stages')
    expect(optionOf(() => resolveLoadOptions({ stages: [{ durationMs: 0, target: 5 }] }))).toBe('stages')
    expect(optionOf(() => resolveLoadOptions({ productId: 0 }))).toBe('productId')
  })
})

describe('parseLoadArgs', () => {
  it('maps flags to options', () => {
    const { options, json } = parseLoadArgs([
      '--url',
      'http://127.0.0.1:9000',
      '--stages',
      '1s:5,2s:0',
      '--users',
      '10-20',
      '--think',
      '50ms',
      '--double-click',
      '0.2',
      '--no-idempotency-keys',
      '--duration',
      '1m',
      '--json',
      'out.json',
    ])
    expect(options).toMatchObject({
      url: 'http://127.0.0.1:9000',
      userIdMin: 10,
      userIdMax: 20,
      thinkTimeMs: 50,
      doubleClickRatio: 0.2,
      idempotencyKeys: false,
      maxDurationMs: 60_000,
    })
    expect(options.stages).toHaveLength(2)
    expect(json).toBe('out.json')
  })

  it('rejects unknown flags and malformed values with typed errors', () => {
    expect(optionOf(() => parseLoadArgs(['--bogus']))).toBe('arguments')
    expect(optionOf(() => parseLoadArgs(['--users', '5']))).toBe('--users')
    expect(optionOf(() => parseLoadArgs(['--think', 'soon']))).toBe('--think')
    expect(optionOf(() => parseLoadArgs(['--repeat', 'half']))).toBe('--repeat')
  })
})

describe('percentiles (exact, nearest rank)', () => {
  it('returns observed samples', () => {
    const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1)
    expect(percentile(sorted, 50)).toBe(50)
    expect(percentile(sorted, 99)).toBe(99)
    expect(percentile(sorted, 100)).toBe(100)
    expect(percentile([7], 99)).toBe(7)
    expect(percentile([], 50)).toBe(0)
    expect(summarise(sorted)).toMatchObject({ count: 100, minMs: 1, maxMs: 100, meanMs: 50.5, p90Ms: 90 })
  })
})
