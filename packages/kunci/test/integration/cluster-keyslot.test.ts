import { randomBytes } from 'node:crypto'
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashTag, keySlot } from '../../src/cluster/slot.js'

// CLUSTER KEYSLOT is a pure function of the key, so one cluster-enabled node (no slots
// assigned) is an exact oracle for keySlot; the 3+3 cluster suite checks routing end to end.
let topology: NodeSet
let redis: Redis

beforeAll(async () => {
  topology = await startNodes({ count: 1, proxy: false, extraArgs: ['--cluster-enabled', 'yes'] })
  const node = topology.nodes[0]!
  redis = new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 })
})

afterAll(async () => {
  redis?.disconnect()
  await topology?.stop()
})

const EDGE_CASES = [
  '',
  '{',
  '}',
  '{}',
  '}{',
  '{{}}',
  '{a',
  'a}',
  '{a}',
  'a{}b',
  'foo{}{bar}',
  'foo{{bar}}zap',
  'foo{bar}{zap}',
  '{user1000}.following',
  '{user1000}.followers',
  '123456789',
  'é',
  '😀',
  '{😀}',
  '{ключ}:1',
  'x\ud800y', // a lone surrogate: ioredis sends U+FFFD
  'x'.repeat(10_000),
  '{' + 'y'.repeat(5000) + '}' + 'z'.repeat(5000),
  '\0{\0}\0',
]

function randomKey(): string {
  const bytes = randomBytes(Math.floor(Math.random() * 24))
  // Sprinkle braces so that every tag shape occurs often, not once in 2^16 keys.
  for (let i = 0; i < bytes.length; i++)
    if (Math.random() < 0.15) bytes[i] = Math.random() < 0.5 ? 0x7b : 0x7d
  let key = bytes.toString('utf8') // invalid sequences become U+FFFD, as in any JS string from bytes
  if (Math.random() < 0.2) key += String.fromCodePoint(0x80 + Math.floor(Math.random() * 0x10f000))
  return key
}

async function serverSlots(keys: readonly (string | Buffer)[]): Promise<number[]> {
  const pipeline = redis.pipeline()
  for (const key of keys) pipeline.cluster('KEYSLOT', key)
  const results = (await pipeline.exec()) ?? []
  return results.map(([err, slot]) => {
    if (err) throw err
    return slot as number
  })
}

describe('keySlot agrees with CLUSTER KEYSLOT', () => {
  it('for the edge cases', async () => {
    const slots = await serverSlots(EDGE_CASES)
    for (const [i, key] of EDGE_CASES.entries())
      expect(keySlot(key), JSON.stringify(key.slice(0, 40))).toBe(slots[i])
    expect(hashTag('foo{{bar}}zap')).toBe('{bar')
  })

  it('for 20,000 random string keys, with and without braces', async () => {
    const keys = Array.from({ length: 20_000 }, randomKey)
    const withTag = keys.filter((k) => hashTag(k) !== undefined).length
    expect(withTag).toBeGreaterThan(2000) // the generator really exercises the tag rule
    expect(keys.length - withTag).toBeGreaterThan(2000)
    const started = performance.now()
    const slots = await serverSlots(keys)
    const ms = performance.now() - started
    const mismatches = keys.filter((key, i) => keySlot(key) !== slots[i])
    expect(mismatches.map((k) => JSON.stringify(k))).toEqual([])
    console.info(`CLUSTER KEYSLOT x ${keys.length} pipelined: ${ms.toFixed(0)} ms`)
  })

  it('for 10,000 random Buffer keys, including bytes that are not valid UTF-8', async () => {
    const keys = Array.from({ length: 10_000 }, () => {
      const bytes = randomBytes(Math.floor(Math.random() * 24))
      for (let i = 0; i < bytes.length; i++)
        if (Math.random() < 0.15) bytes[i] = Math.random() < 0.5 ? 0x7b : 0x7d
      return bytes
    })
    const slots = await serverSlots(keys)
    const mismatches = keys.filter((key, i) => keySlot(key) !== slots[i])
    expect(mismatches.map((k) => k.toString('hex'))).toEqual([])
  })
})
