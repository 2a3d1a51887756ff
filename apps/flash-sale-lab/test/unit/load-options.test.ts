import { TicketSigner } from '@kunci/flash-sale'
import { describe, expect, it } from 'vitest'
import { parseLoadArgs } from '../../src/cli/load.js'
import { crowdFigures, ranks, spearman } from '../../src/load/crowd-figures.js'
import { LoadOptionError } from '../../src/load/errors.js'
import { lineKeyOf } from '../../src/load/journeys.js'
import { percentile, summarise } from '../../src/load/latency.js'
import { DEFAULT_LOAD_OPTIONS, resolveLoadOptions } from '../../src/load/load-options.js'
import type { LoadUser } from '../../src/load/result.js'
import { arrivalsBy, parseStages, totalDurationMs, vusAt } from '../../src/load/stages.js'

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

describe('crowd modes (a crowd, straight or through the waiting room)', () => {
  it('defaults: purchases; polls kept within 1–10 s; patience 2 min', () => {
    expect(resolveLoadOptions()).toMatchObject({
      mode: 'purchases',
      pollIntervalMs: [1_000, 10_000],
      patienceMs: 120_000,
    })
    expect(Object.isFrozen(DEFAULT_LOAD_OPTIONS.pollIntervalMs)).toBe(true)
  })

  it('maps --waiting-room, --crowd, --poll and --patience', () => {
    const { options } = parseLoadArgs(['--waiting-room', '--poll', '250ms-2s', '--patience', '30s'])
    expect(options).toMatchObject({ mode: 'waiting-room', pollIntervalMs: [250, 2_000], patienceMs: 30_000 })
    expect(parseLoadArgs(['--crowd']).options.mode).toBe('crowd')
    expect(parseLoadArgs([]).options.mode).toBeUndefined()
    expect(optionOf(() => parseLoadArgs(['--crowd', '--waiting-room']))).toBe('--waiting-room')
    expect(optionOf(() => parseLoadArgs(['--poll', '2s']))).toBe('--poll')
    expect(optionOf(() => parseLoadArgs(['--poll', 'often-rarely']))).toBe('--poll')
    expect(optionOf(() => parseLoadArgs(['--patience', 'forever']))).toBe('--patience')
  })

  it('names the bad option', () => {
    const crowd = { stages: [{ durationMs: 1_000, target: 50 }] }
    expect(optionOf(() => resolveLoadOptions({ mode: 'queue' as never }))).toBe('mode')
    expect(optionOf(() => resolveLoadOptions({ pollIntervalMs: [0, 1_000] }))).toBe('pollIntervalMs')
    expect(optionOf(() => resolveLoadOptions({ pollIntervalMs: [2_000, 1_000] }))).toBe('pollIntervalMs')
    expect(optionOf(() => resolveLoadOptions({ pollIntervalMs: [1, Number.POSITIVE_INFINITY] }))).toBe(
      'pollIntervalMs',
    )
    expect(optionOf(() => resolveLoadOptions({ patienceMs: 0 }))).toBe('patienceMs')
    expect(optionOf(() => resolveLoadOptions({ patienceMs: Number.POSITIVE_INFINITY }))).toBe('patienceMs')
    // One distinct user per VU: a crowd of 50 needs 50 ids.
    expect(
      optionOf(() => resolveLoadOptions({ ...crowd, mode: 'waiting-room', userIdMin: 1, userIdMax: 49 })),
    ).toBe('userIdMax')
    expect(resolveLoadOptions({ ...crowd, mode: 'crowd', userIdMin: 1, userIdMax: 50 }).mode).toBe('crowd')
    // The purchases mode draws random ids: any range does.
    expect(resolveLoadOptions({ ...crowd, userIdMin: 1, userIdMax: 1 }).userIdMax).toBe(1)
  })

  it('counts arrivals as the highest target reached, a ramp down removing nobody', () => {
    const stages = parseStages('2s:200,1s:0')
    expect(arrivalsBy(stages, 0)).toBe(0)
    expect(arrivalsBy(stages, 1_000)).toBe(100)
    expect(arrivalsBy(stages, 1_999)).toBe(199)
    // A tick that skips the instant the ramp reached 200 still brings the 200th user.
    expect(arrivalsBy(stages, 2_020)).toBe(200)
    expect(arrivalsBy(stages, 2_500)).toBe(200)
    expect(arrivalsBy(stages, 10_000)).toBe(200)
    expect(vusAt(stages, 2_500)).toBe(100)
  })
})

describe('crowd figures', () => {
  it('ranks ties by their average rank, and Spearman is 1, -1 or in between', () => {
    expect(ranks([10, 20, 20, 5])).toEqual([2, 3.5, 3.5, 1])
    expect(spearman([1, 2, 3, 4], [10, 20, 30, 40])).toBe(1)
    expect(spearman([1, 2, 3, 4], [40, 30, 20, 10])).toBe(-1)
    expect(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5])).toBe(0.8)
    expect(spearman([1, 2], [1, 2])).toBeNull()
    expect(spearman([1, 1, 1], [1, 2, 3])).toBeNull()
  })

  const user = (u: Partial<LoadUser> & Pick<LoadUser, 'user_id' | 'arrivedMs' | 'outcome' | 'outcomeMs'>) =>
    ({
      admittedMs: null,
      position: null,
      lineKey: null,
      reason: null,
      order_id: null,
      requests: 1,
      ...u,
    }) as LoadUser

  it('requests per user and per purchase, fairness, and when the last waiter learnt it was sold out', () => {
    const users = [
      user({ user_id: 1, arrivedMs: 0, outcome: 'purchased', outcomeMs: 100, requests: 3 }),
      user({ user_id: 2, arrivedMs: 10, outcome: 'sold_out', outcomeMs: 900, requests: 5 }),
      user({ user_id: 3, arrivedMs: 20, outcome: 'purchased', outcomeMs: 300, requests: 2 }),
      user({ user_id: 4, arrivedMs: 30, outcome: 'purchased', outcomeMs: 200, requests: 2 }),
      // Arrived after the sell-out: not among those still waiting then.
      user({ user_id: 5, arrivedMs: 400, outcome: 'sold_out', outcomeMs: 410, requests: 1 }),
      // Told before the last buyer's answer arrived: counts 0.
      user({ user_id: 6, arrivedMs: 40, outcome: 'sold_out', outcomeMs: 250, requests: 1 }),
      user({ user_id: 7, arrivedMs: 50, outcome: 'gave_up', outcomeMs: 5_000, requests: 6 }),
    ]
    const f = crowdFigures(users)
    expect(f).toMatchObject({
      users: 7,
      bought: 3,
      requests: 20,
      requestsPerPurchase: 6.67,
      outcomes: { purchased: 3, sold_out: 3, gave_up: 1 },
      soldOutAtMs: 300,
      lastWaiters: { count: 2, p50Ms: 0, maxMs: 600 },
      waitToAdmissionMs: null,
    })
    expect(f.requestsPerUser).toMatchObject({ max: 6, p50: 2 })
    // Buyers arrived 1, 3, 4 and bought 1, 4, 3: ρ = 0.5. Of the first 3 arrivals (1, 2, 3) two bought.
    expect(f.spearman).toBe(0.5)
    expect(f.firstArrivalsShare).toBe(0.667)
    const admitted = crowdFigures([
      user({ user_id: 1, arrivedMs: 100, admittedMs: 1_600, outcome: 'purchased', outcomeMs: 1_700 }),
    ])
    expect(admitted.waitToAdmissionMs).toMatchObject({ p50: 1_500, max: 1_500 })
    expect(admitted.soldOutAtMs).toBeNull()
  })
})

describe('lineKeyOf', () => {
  it('reads the order key of a ticket the service signs, and nothing from what is not one', () => {
    const signer = new TicketSigner('x'.repeat(32))
    const claims = {
      productId: '42',
      generation: '00000000000000ab',
      userId: 'u-7',
      orderKey: '1796000000123456',
    }
    expect(lineKeyOf(signer.sign(claims))).toBe('1796000000123456')
    expect(lineKeyOf(signer.sign({ ...claims, orderKey: '17' }))).toBe('17')
    expect(lineKeyOf('not a ticket')).toBeNull()
    expect(lineKeyOf(`v1.${Buffer.from('42|ab|u|x1').toString('base64url')}.mac`)).toBeNull()
  })
})
