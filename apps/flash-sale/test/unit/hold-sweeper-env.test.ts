import { describe, expect, it } from 'vitest'
import { holdSweeperEnv } from '../../src/orders/hold-sweeper.js'

describe('the hold sweeper settings from the environment', () => {
  it('leaves unset variables to the defaults', () => {
    expect(holdSweeperEnv({})).toEqual({
      intervalMs: undefined,
      lockTtlMs: undefined,
      batchSize: undefined,
      maxBatches: undefined,
      testPause: undefined,
    })
  })

  it('reads the values and the test pause', () => {
    expect(
      holdSweeperEnv({
        HOLD_SWEEP_INTERVAL_MS: '250',
        HOLD_SWEEP_LOCK_TTL_MS: '2000',
        HOLD_SWEEP_BATCH: '50',
        HOLD_SWEEP_MAX_BATCHES: '3',
        HOLD_SWEEP_TEST_PAUSE: 'before-write:1500',
      }),
    ).toEqual({
      intervalMs: 250,
      lockTtlMs: 2_000,
      batchSize: 50,
      maxBatches: 3,
      testPause: { at: 'before-write', ms: 1_500 },
    })
  })

  it('refuses malformed values, naming the variable and the rule', () => {
    expect(() => holdSweeperEnv({ HOLD_SWEEP_INTERVAL_MS: '10' })).toThrow(
      'HOLD_SWEEP_INTERVAL_MS=10: expected an integer from 50 to 600000',
    )
    expect(() => holdSweeperEnv({ HOLD_SWEEP_LOCK_TTL_MS: 'soon' })).toThrow('HOLD_SWEEP_LOCK_TTL_MS=soon')
    expect(() => holdSweeperEnv({ HOLD_SWEEP_TEST_PAUSE: 'later:5' })).toThrow('before-write:<ms>')
  })
})
