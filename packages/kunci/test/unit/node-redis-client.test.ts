/**
 * node-redis support without a server: which clients are refused at the entry points. The
 * static guards over src/ (imports of client libraries, casts) are in seams.test.ts.
 */
import { Cache, deleteByPattern, InvalidOptionError, RedisLock, Redlock } from 'kunci'
import { createClient, createCluster } from 'redis'
import { describe, expect, it } from 'vitest'

function rejection(make: () => unknown): InvalidOptionError {
  try {
    make()
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError)
    return err as InvalidOptionError
  }
  throw new Error('expected InvalidOptionError')
}

describe('node-redis clients at the entry points', () => {
  it('refuses a client that is not connected yet, naming the option', () => {
    const c = createClient({ socket: { port: 1 } })
    expect(rejection(() => new Redlock({ clients: [c] })).option).toBe('clients')
    expect(rejection(() => new RedisLock({ client: c })).option).toBe('client')
    expect(rejection(() => new Cache({ client: c })).option).toBe('client')
    const cluster = createCluster({ rootNodes: [{ socket: { port: 1 } }] })
    expect(rejection(() => new Cache({ client: cluster })).option).toBe('client')
  })

  it('refuses a RESP3 client (kunci reads RESP2 replies)', async () => {
    const c = createClient({ RESP: 3, socket: { port: 1 } })
    expect(rejection(() => new Redlock({ clients: [c] })).code).toBe('E_INVALID_OPTION')
    await expect(deleteByPattern(c, { match: 'x*' })).rejects.toBeInstanceOf(InvalidOptionError)
  })

  it('refuses something that is neither ioredis nor node-redis', () => {
    expect(rejection(() => new Cache({ client: { sendCommand() {} } as never })).option).toBe('client')
  })
})
