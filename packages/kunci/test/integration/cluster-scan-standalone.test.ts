import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deleteByPattern, escapeGlob, scanKeys } from '../../src/cluster/scan.js'
import { InvalidOptionError } from '../../src/errors.js'

// The scan helpers on a standalone Redis: the same code path a Cluster takes per master.
let topology: NodeSet
let redis: Redis
let run = 0

/** A unique prefix per test, so tests never see each other's keys (and nothing is FLUSHALLed). */
function prefix(): string {
  return `scan-standalone:${process.pid}:${run++}:`
}

async function fill(keys: readonly (string | Buffer)[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) {
    const pipeline = redis.pipeline()
    for (const key of keys.slice(i, i + 1000)) pipeline.set(key, '1')
    const results = await pipeline.exec()
    for (const [err] of results ?? []) if (err) throw err
  }
}

async function collect(match: string, count?: number): Promise<string[]> {
  const seen: string[] = []
  for await (const batch of scanKeys(redis, { match, ...(count ? { count } : {}) })) {
    expect(batch.length).toBeGreaterThan(0)
    seen.push(...batch)
  }
  return seen
}

async function commandCalls(name: string): Promise<number> {
  const info = await redis.info('commandstats')
  const m = new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(info)
  return m ? Number(m[1]) : 0
}

beforeAll(async () => {
  topology = await startNodes({ count: 1, proxy: false })
  const node = topology.nodes[0]!
  redis = new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 })
})

afterAll(async () => {
  redis?.disconnect()
  await topology?.stop()
})

describe('scanKeys on a standalone Redis', () => {
  it('returns every matching key and no other', async () => {
    const p = prefix()
    const matching = Array.from({ length: 3000 }, (_, i) => `${p}hit:${i}`)
    const others = Array.from({ length: 1000 }, (_, i) => `${p}miss:${i}`)
    await fill([...matching, ...others])
    const seen = await collect(`${p}hit:*`, 100)
    expect(new Set(seen)).toEqual(new Set(matching))
    expect(seen.length).toBeGreaterThanOrEqual(matching.length) // at-least-once; no extra names
  })

  it('matches an escaped prefix literally', async () => {
    const p = prefix()
    const literal = [`${p}user[1]*:a`, `${p}user[1]*:b`, `${p}user[1]*`]
    // Each of these would match if the prefix were used as a raw glob.
    const lookalikes = [`${p}user1*:a`, `${p}user[1]x:a`, `${p}user1:a`, `${p}user[1]`]
    await fill([...literal, ...lookalikes])
    expect(new Set(await collect(`${p}user[1]*`))).toEqual(new Set([`${p}user1*:a`, `${p}user1:a`]))
    expect(new Set(await collect(escapeGlob(`${p}user[1]*`) + '*'))).toEqual(new Set(literal))
    const slash = [`${p}a\\b?c:1`]
    await fill([...slash, `${p}a\\bxc:1`, `${p}abxc:1`])
    expect(await collect(escapeGlob(`${p}a\\b?c`) + '*')).toEqual(slash)
  })

  it('stops when the signal is aborted, with the signal reason', async () => {
    const p = prefix()
    await fill(Array.from({ length: 2000 }, (_, i) => `${p}${i}`))
    const controller = new AbortController()
    const reason = new Error('stop')
    let batches = 0
    await expect(
      (async () => {
        for await (const _ of scanKeys(redis, { match: `${p}*`, count: 10, signal: controller.signal })) {
          if (++batches === 2) controller.abort(reason)
        }
      })(),
    ).rejects.toBe(reason)
    expect(batches).toBe(2)
  })

  it('abort interrupts a SCAN stuck on a paused node', async () => {
    const p = prefix()
    await fill([`${p}a`])
    const node = topology.nodes[0]!
    const controller = new AbortController()
    const reason = new Error('gave up')
    node.pause()
    try {
      const started = performance.now()
      setTimeout(() => controller.abort(reason), 200)
      await expect(collectWith(`${p}*`, controller.signal)).rejects.toBe(reason)
      expect(performance.now() - started).toBeLessThan(5_000)
    } finally {
      node.resume()
    }
    expect(await collect(`${p}*`)).toEqual([`${p}a`]) // the client is usable afterwards
  })
})

async function collectWith(match: string, signal: AbortSignal): Promise<string[]> {
  const seen: string[] = []
  for await (const batch of scanKeys(redis, { match, signal })) seen.push(...batch)
  return seen
}

describe('deleteByPattern on a standalone Redis', () => {
  it('deletes exactly the matching keys and returns how many', async () => {
    const p = prefix()
    const matching = Array.from({ length: 2500 }, (_, i) => `${p}gone:${i}`)
    const others = Array.from({ length: 500 }, (_, i) => `${p}kept:${i}`)
    await fill([...matching, ...others])
    expect(await deleteByPattern(redis, { match: `${p}gone:*`, count: 200 })).toBe(matching.length)
    expect(await collect(`${p}gone:*`)).toEqual([])
    expect(new Set(await collect(`${p}*`))).toEqual(new Set(others))
    expect(await deleteByPattern(redis, { match: `${p}gone:*` })).toBe(0)
  })

  it('deletes with DEL when unlink is false, and deletes keys that are not valid UTF-8', async () => {
    const p = prefix()
    const binary = [Buffer.concat([Buffer.from(p), Buffer.from([0xff, 0xfe, 0x00, 0x80])])]
    await fill([...binary, `${p}text`])
    const before = await commandCalls('del')
    expect(await deleteByPattern(redis, { match: `${p}*`, unlink: false })).toBe(2)
    expect(await commandCalls('del')).toBeGreaterThan(before)
    expect(await redis.exists(binary[0]!)).toBe(0)
  })

  it('refuses a client with keyPrefix, whose names would be prefixed twice', async () => {
    const prefixed = new Redis({ port: redis.options.port, keyPrefix: 'app:', lazyConnect: true })
    try {
      await expect(deleteByPattern(prefixed, { match: '*' })).rejects.toBeInstanceOf(InvalidOptionError)
    } finally {
      prefixed.disconnect()
    }
  })

  it('requires an explicit match', async () => {
    await expect(deleteByPattern(redis, {} as { match: string })).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
      option: 'match',
    })
  })

  it('never sends KEYS: only SCAN', async () => {
    const p = prefix()
    await fill(Array.from({ length: 1500 }, (_, i) => `${p}${i}`))
    await redis.config('RESETSTAT')
    expect(await commandCalls('scan')).toBe(0)
    expect((await collect(`${p}*`, 100)).length).toBeGreaterThanOrEqual(1500)
    expect(await deleteByPattern(redis, { match: `${p}*`, count: 100 })).toBe(1500)
    const info = await redis.info('commandstats')
    expect(info).not.toMatch(/^cmdstat_keys:/m)
    expect(await commandCalls('scan')).toBeGreaterThan(2)
    expect(await commandCalls('unlink')).toBeGreaterThan(0)
  })
})
