import { describe, expect, it } from 'vitest'
import { ConfigError, DEFAULT_CONFIG, loadConfig } from '../../src/config.js'

const base = {
  REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6379',
  DATABASE_URL: 'postgres://app@db:5432/sale',
  ADMIN_TOKEN: 'a-long-enough-admin-token',
}

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig(base)
    expect(c).toMatchObject({
      strategy: DEFAULT_CONFIG.strategy,
      durability: 'replica',
      port: 8080,
      workerPort: 9464,
      redis: {
        cluster: [
          { host: '10.0.0.1', port: 6379 },
          { host: '10.0.0.2', port: 6379 },
        ],
      },
      redlockNodes: [],
    })
  })

  it('DEFAULT_WALLET_BALANCE: 0 in production, currency units with at most 2 decimals → cents', () => {
    expect(loadConfig(base).defaultWalletBalanceCents).toBe(0)
    expect(loadConfig({ ...base, DEFAULT_WALLET_BALANCE: '1000.00' }).defaultWalletBalanceCents).toBe(100_000)
    expect(loadConfig({ ...base, DEFAULT_WALLET_BALANCE: '150.5' }).defaultWalletBalanceCents).toBe(15_050)
    expect(loadConfig({ ...base, DEFAULT_WALLET_BALANCE: '7' }).defaultWalletBalanceCents).toBe(700)
    for (const bad of ['-1', '1.234', 'ten', '1e3']) {
      expect(() => loadConfig({ ...base, DEFAULT_WALLET_BALANCE: bad }), bad).toThrow(
        /DEFAULT_WALLET_BALANCE/,
      )
    }
  })

  it('reports every problem at once, each naming its variable', () => {
    let err: unknown
    try {
      loadConfig({
        STRATEGY: 'fast',
        PORT: '99999',
        REDIS_CLUSTER_NODES: 'nohost',
        ADMIN_TOKEN: 'short',
        QUEUE_URL: 'http://x',
      })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ConfigError)
    const problems = (err as ConfigError).problems.join('\n')
    for (const name of [
      'STRATEGY',
      'PORT',
      'REDIS_CLUSTER_NODES',
      'DATABASE_URL',
      'ADMIN_TOKEN',
      'QUEUE_URL',
    ]) {
      expect(problems).toContain(name)
    }
    expect((err as ConfigError).code).toBe('E_CONFIG')
  })

  it('requires 3 or more lock nodes for the redlock strategy, and one Redis target', () => {
    expect(() => loadConfig({ ...base, STRATEGY: 'redlock' })).toThrow(ConfigError)
    expect(() => loadConfig({ ...base, STRATEGY: 'redlock', REDLOCK_NODES: 'a:1,b:2' })).toThrow(/at least 3/)
    expect(
      loadConfig({ ...base, STRATEGY: 'redlock', REDLOCK_NODES: 'a:1,b:2,c:3,d:4,e:5' }).redlockNodes,
    ).toHaveLength(5)
    expect(() => loadConfig({ ...base, REDIS_URL: 'redis://x:6379' })).toThrow(/both set/)
  })

  it('lets CLI flags override the environment', () => {
    expect(loadConfig({ ...base, STRATEGY: 'naive' }, { STRATEGY: 'lua' }).strategy).toBe('lua')
  })
})

describe('loadConfig: the hold sweeper (HOLD_SWEEP_*)', () => {
  it('leaves unset variables to the sweeper’s defaults', () => {
    expect(loadConfig(base).holdSweep).toEqual({
      intervalMs: undefined,
      lockTtlMs: undefined,
      batchSize: undefined,
      maxBatches: undefined,
      testPause: undefined,
    })
  })

  it('reads the values and the test pause', () => {
    expect(
      loadConfig({
        ...base,
        HOLD_SWEEP_INTERVAL_MS: '250',
        HOLD_SWEEP_LOCK_TTL_MS: '2000',
        HOLD_SWEEP_BATCH: '50',
        HOLD_SWEEP_MAX_BATCHES: '3',
        HOLD_SWEEP_TEST_PAUSE: 'before-write:1500',
      }).holdSweep,
    ).toEqual({
      intervalMs: 250,
      lockTtlMs: 2_000,
      batchSize: 50,
      maxBatches: 3,
      testPause: { at: 'before-write', ms: 1_500 },
    })
  })

  it('refuses malformed values, naming the variable and the rule', () => {
    expect(() => loadConfig({ ...base, HOLD_SWEEP_INTERVAL_MS: '10' })).toThrow(
      'HOLD_SWEEP_INTERVAL_MS=10: expected an integer from 50 to 600000',
    )
    expect(() => loadConfig({ ...base, HOLD_SWEEP_LOCK_TTL_MS: 'soon' })).toThrow(
      'HOLD_SWEEP_LOCK_TTL_MS=soon',
    )
    expect(() => loadConfig({ ...base, HOLD_SWEEP_TEST_PAUSE: 'later:5' })).toThrow('before-write:<ms>')
    expect(() => loadConfig({ ...base, HOLD_SWEEP_TEST_PAUSE: 'later:5' })).toThrow(ConfigError)
  })
})
