import { Redis } from 'ioredis'
import { DEFAULT_LOCK_OPTIONS, InvalidOptionError, RedisLock, Redlock } from 'kunci'
import { afterAll, describe, expect, it } from 'vitest'

// Unconnected clients: validation must fail before anything touches the network.
const made: Redis[] = []
const client = (port: number) => {
  const c = new Redis({ port, lazyConnect: true })
  made.push(c)
  return c
}
afterAll(() => {
  for (const c of made) c.disconnect()
})

function optionOf(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError)
    expect((err as InvalidOptionError).code).toBe('E_INVALID_OPTION')
    return (err as InvalidOptionError).option
  }
  return undefined
}

describe('lock manager options are checked at once', () => {
  const three = () => [client(1), client(2), client(3)]
  it.each([
    ['no options', () => new Redlock(undefined as never), 'options'],
    ['no clients', () => new Redlock({ clients: [] }), 'clients'],
    ['clients not an array', () => new Redlock({ clients: 'x' as never }), 'clients'],
    ['not an ioredis client', () => new Redlock({ clients: [{} as never] }), 'clients'],
    [
      'the same client twice',
      () => {
        const c = client(4)
        return new Redlock({ clients: [c, c] })
      },
      'clients',
    ],
    ['two clients for one node', () => new Redlock({ clients: [client(5), client(5)] }), 'clients'],
    ['ttl 0', () => new Redlock({ clients: three(), ttlMs: 0 }), 'ttlMs'],
    ['ttl negative', () => new Redlock({ clients: three(), ttlMs: -5 }), 'ttlMs'],
    ['ttl not an integer', () => new Redlock({ clients: three(), ttlMs: 1.5 }), 'ttlMs'],
    ['ttl a string', () => new Redlock({ clients: three(), ttlMs: '100' as never }), 'ttlMs'],
    ['ttl 1 ms (below the drift allowance)', () => new Redlock({ clients: three(), ttlMs: 1 }), 'ttlMs'],
    ['ttl above maxTtlMs', () => new Redlock({ clients: three(), ttlMs: 5000, maxTtlMs: 1000 }), 'ttlMs'],
    ['retryCount negative', () => new Redlock({ clients: three(), retryCount: -1 }), 'retryCount'],
    ['nodeTimeoutMs 0', () => new Redlock({ clients: three(), nodeTimeoutMs: 0 }), 'nodeTimeoutMs'],
    ['driftFactor 1', () => new Redlock({ clients: three(), driftFactor: 1 }), 'driftFactor'],
    ['prefix with a brace', () => new Redlock({ clients: three(), prefix: 'a{' }), 'prefix'],
    [
      'persistence unknown',
      () => new Redlock({ clients: three(), persistence: 'sometimes' as never }),
      'persistence',
    ],
    [
      'firstContact unknown',
      () => new Redlock({ clients: three(), firstContact: 'trust' as never }),
      'firstContact',
    ],
    [
      'clockToleranceMs negative',
      () => new Redlock({ clients: three(), clockToleranceMs: -1 }),
      'clockToleranceMs',
    ],
    [
      'RedisLock waitForReplicas 0',
      () => new RedisLock({ client: client(6), waitForReplicas: { replicas: 0, timeoutMs: 10 } }),
      'waitForReplicas',
    ],
    [
      'RedisLock waitForReplicas probeIntervalMs 0',
      () =>
        new RedisLock({
          client: client(7),
          waitForReplicas: { replicas: 1, timeoutMs: 10, probeIntervalMs: 0 },
        }),
      'waitForReplicas',
    ],
  ])('%s', (_name, make, option) => {
    expect(optionOf(make)).toBe(option)
  })

  it('per-call options go through the same checks', async () => {
    const rl = new Redlock({ clients: three(), quarantine: false, onWarning: () => {} })
    await expect(rl.acquire('r', { ttlMs: 0 })).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
      option: 'ttlMs',
    })
    await expect(rl.acquire([])).rejects.toMatchObject({ code: 'E_INVALID_OPTION', option: 'resources' })
    await expect(rl.acquire('')).rejects.toMatchObject({ option: 'resources' })
    await expect(rl.acquire(['a', 'a'])).rejects.toMatchObject({ option: 'resources' })
    await expect(rl.acquire('r', { signal: 'x' as never })).rejects.toMatchObject({ option: 'signal' })
    await expect(rl.using('r', {}, 'not a function' as never)).rejects.toMatchObject({ option: 'fn' })
    await expect(rl.using('r', { ttlMs: 100, extendBeforeMs: 100 }, async () => 1)).rejects.toMatchObject({
      option: 'extendBeforeMs',
    })
    await rl.close()
    await expect(rl.acquire('r')).rejects.toMatchObject({ code: 'E_CLOSED' })
  })

  it('defaults are frozen and documented values', () => {
    expect(Object.isFrozen(DEFAULT_LOCK_OPTIONS)).toBe(true)
    expect(DEFAULT_LOCK_OPTIONS.driftFactor).toBe(0.01)
    expect(DEFAULT_LOCK_OPTIONS.driftConstantMs).toBe(2)
    expect(DEFAULT_LOCK_OPTIONS.retryCount).toBe(10)
    expect(DEFAULT_LOCK_OPTIONS.firstContact).toBe('uptime')
    expect(DEFAULT_LOCK_OPTIONS.clockToleranceMs).toBe(1000)
  })
})
