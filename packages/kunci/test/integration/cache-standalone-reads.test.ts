/**
 * The hit path on one node (value-reader.ts): the GETs of a tick leave in one write, around
 * ioredis' auto-pipeline when the client has it on, with the client's keyPrefix.
 */
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { Cache } from '../../src/cache/cache.js'
import { valueKey } from '../../src/cache/cache-keys.js'
import { standaloneCacheSuite, uniquePrefix } from '../fixtures/cache-test-kit.js'

const suite = standaloneCacheSuite(1)
const clients: Redis[] = []
const caches: Cache[] = []

afterAll(async () => {
  await Promise.all(caches.map((c) => c.close()))
  for (const c of clients) c.disconnect()
})

function newClient(options: RedisOptions): Redis {
  const n = suite.nodes.nodes[0]!
  const client = new Redis({ host: n.host, port: n.port, ...options })
  clients.push(client)
  return client
}

/** Records, for every command the client sends, whether it went inside an auto-pipeline. */
function recordSends(client: Redis): { name: string; viaPipeline: boolean }[] {
  const sent: { name: string; viaPipeline: boolean }[] = []
  const original = client.sendCommand.bind(client)
  client.sendCommand = ((command: { name: string }, stream?: unknown) => {
    sent.push({ name: command.name, viaPipeline: stream !== undefined })
    return original(command as never, stream as never)
  }) as typeof client.sendCommand
  return sent
}

describe.each([
  ['a plain client', {}],
  ['an auto-pipelining client', { enableAutoPipelining: true }],
  ['an auto-pipelining client with a keyPrefix', { enableAutoPipelining: true, keyPrefix: 'app:' }],
] as const)('Cache hits on one node through %s', (_name, options) => {
  it('one tick of 200 hits: each caller gets its own value, and no GET waits in a pipeline', async () => {
    const client = newClient(options)
    const prefix = uniquePrefix('reads')
    const cache = new Cache({ client, prefix, defaultTtlMs: 60_000 })
    caches.push(cache)
    const keys = Array.from({ length: 200 }, (_, i) => `k:${i}`)
    for (const [i, key] of keys.entries()) await cache.set({ key, value: { key, i } })
    const sent = recordSends(client)

    const values = await Promise.all(
      keys.map((key) =>
        cache.getOrSet({
          key,
          loader: () => {
            throw new Error(`the loader ran for ${key}`)
          },
        }),
      ),
    )
    expect(values).toEqual(keys.map((key, i) => ({ key, i })))
    const gets = sent.filter((s) => s.name === 'get')
    expect(gets).toHaveLength(keys.length)
    expect(gets.filter((s) => s.viaPipeline)).toEqual([])
    // The values were written and read under the client's keyPrefix.
    const raw = newClient({})
    expect(
      await raw.exists(`${(options as RedisOptions).keyPrefix ?? ''}${valueKey(prefix, keys[0]!)}`),
    ).toBe(1)
  })
})
