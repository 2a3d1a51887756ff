/**
 * node-redis support without a server: which clients are refused, and two static guards over
 * src/ — no runtime import of ioredis (a user may have only `redis` installed), and every client
 * method the internals call exists on the node-redis wrappers (the internals are written against
 * ioredis' API; a call the wrappers lack would fail only for node-redis users).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Cache, deleteByPattern, InvalidOptionError, RedisLock, Redlock } from 'kunci'
import { createClient, createCluster } from 'redis'
import { describe, expect, it } from 'vitest'
import { NodeRedisStandalone } from '../../src/redis/node-redis-adapter.js'
import { NodeRedisClusterAdapter } from '../../src/redis/node-redis-cluster.js'

const SRC = fileURLToPath(new URL('../../src/', import.meta.url))

function sources(dir = SRC): { path: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name)
    if (e.isDirectory()) return sources(p)
    return e.name.endsWith('.ts') ? [{ path: p.slice(SRC.length), text: readFileSync(p, 'utf8') }] : []
  })
}

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

describe('static guards over src/', () => {
  it('imports nothing from ioredis or redis at runtime (type-only imports are erased)', () => {
    const offenders = sources().flatMap(({ path, text }) =>
      // `import { type X }` stays a runtime import under verbatimModuleSyntax: only `import type` is erased.
      [
        ...text.matchAll(
          /^import\s+(?!type\s)(?:[^'\n]*|\{[^}]*\})\s*(?:from\s+)?'(ioredis|redis|@redis\/[^']+)'/gm,
        ),
      ].map((m) => `${path}: ${m[0].split('\n')[0]}`),
    )
    expect(offenders).toEqual([])
  })

  it('every method called on a client or cluster in src/ exists on the node-redis wrappers', () => {
    const ignored = new Set(['on', 'off', 'once', 'removeAllListeners']) // EventEmitter's, inherited
    const called = new Set<string>()
    for (const { path, text } of sources()) {
      if (path.startsWith('redis/node-redis') || path === 'redis/client.ts') continue
      for (const m of text.matchAll(/\b(?:client|cluster)\.(\w+)\(/g)) called.add(m[1]!)
    }
    expect(called.size).toBeGreaterThan(5) // the pattern still finds the calls
    const provided = (name: string) =>
      ignored.has(name) ||
      typeof (NodeRedisStandalone.prototype as unknown as Record<string, unknown>)[name] === 'function' ||
      typeof (NodeRedisClusterAdapter.prototype as unknown as Record<string, unknown>)[name] === 'function'
    expect([...called].filter((name) => !provided(name))).toEqual([])
  })
})
