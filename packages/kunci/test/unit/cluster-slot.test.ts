import { describe, expect, it } from 'vitest'
import { hashTag, keySlot, SLOT_COUNT } from '../../src/cluster/slot.js'

/** Bit-by-bit CRC16-XMODEM straight from the definition, to check the table-driven version. */
function referenceSlot(key: string | Buffer): number {
  let bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key
  const open = bytes.indexOf(0x7b)
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) bytes = bytes.subarray(open + 1, close)
  }
  let crc = 0
  for (const byte of bytes) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16384
}

// A deterministic generator, so a failure can be reproduced from the seed.
function rng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0
    return s / 2 ** 32
  }
}

function randomKey(rand: () => number): string {
  const pieces = ['{', '}', '{}', 'a', 'é', '€', '😀', '\ud800', '\udc00', ':', '\0', 'user', '1000']
  let key = ''
  const n = Math.floor(rand() * 16)
  for (let i = 0; i < n; i++) {
    key +=
      rand() < 0.6
        ? pieces[Math.floor(rand() * pieces.length)]
        : String.fromCharCode(Math.floor(rand() * (rand() < 0.5 ? 0x80 : 0x10000)))
  }
  return key
}

describe('keySlot', () => {
  it('matches the vectors from the Redis Cluster specification', () => {
    expect(SLOT_COUNT).toBe(16384)
    expect(keySlot('123456789')).toBe(12739) // 0x31C3, the CRC16-XMODEM check value, mod 16384
    expect(keySlot('foo')).toBe(12182)
    expect(keySlot('')).toBe(0)
  })

  it('hashes only the tag when there is a non-empty {tag}', () => {
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'))
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'))
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'))
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'))
    expect(keySlot('a{b}c')).toBe(keySlot('x{b}y'))
  })

  it('hashes the whole key for an empty tag or an unclosed brace', () => {
    expect(hashTag('foo{}{bar}')).toBeUndefined()
    expect(keySlot('foo{}{bar}')).toBe(referenceSlot(Buffer.from('foo{}{bar}')))
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'))
    expect(keySlot('{abc')).not.toBe(keySlot('abc'))
    expect(keySlot('abc}')).toBe(referenceSlot(Buffer.from('abc}')))
    expect(keySlot('}{abc}')).toBe(keySlot('abc')) // a '}' before the first '{' does not count
  })

  it('uses the UTF-8 bytes of unicode keys', () => {
    for (const key of ['é', '€uro', '😀', 'ключ', '{ユーザー}:1', '{😀}x', 'a\u0000b']) {
      expect(keySlot(key)).toBe(referenceSlot(Buffer.from(key, 'utf8')))
    }
    expect(keySlot('{ユーザー}:1')).toBe(keySlot('ユーザー'))
    // A lone surrogate is sent by ioredis as U+FFFD (EF BF BD).
    expect(keySlot('x\ud800y')).toBe(keySlot('x\ufffdy'))
    expect(keySlot('\udc00')).toBe(keySlot('\ufffd'))
  })

  it('gives the same slot for a string and its UTF-8 Buffer, and agrees with a bitwise CRC', () => {
    const rand = rng(42)
    for (let i = 0; i < 20_000; i++) {
      const key = randomKey(rand)
      const bytes = Buffer.from(key, 'utf8')
      const expected = referenceSlot(bytes)
      expect(keySlot(key), JSON.stringify(key)).toBe(expected)
      expect(keySlot(bytes), JSON.stringify(key)).toBe(expected)
      expect(keySlot(new Uint8Array(bytes)), JSON.stringify(key)).toBe(expected)
    }
  })

  it('handles arbitrary bytes in Buffer keys, including braces', () => {
    const rand = rng(7)
    for (let i = 0; i < 5_000; i++) {
      const bytes = Buffer.alloc(Math.floor(rand() * 20))
      for (let j = 0; j < bytes.length; j++)
        bytes[j] = rand() < 0.2 ? (rand() < 0.5 ? 0x7b : 0x7d) : rand() * 256
      expect(keySlot(bytes)).toBe(referenceSlot(bytes))
    }
  })

  it('reads a Buffer view at its offset', () => {
    const whole = Buffer.from('xxx{tag}yyy')
    const view = whole.subarray(3, 8) // "{tag}"
    expect(keySlot(view)).toBe(keySlot('tag'))
    expect(hashTag(view)).toBe('tag')
  })

  it('spreads keys over the whole slot range', () => {
    const seen = new Set<number>()
    let min = Infinity
    let max = -Infinity
    for (let i = 0; i < 200_000; i++) {
      const slot = keySlot(`key:${i}`)
      min = Math.min(min, slot)
      max = Math.max(max, slot)
      seen.add(slot)
    }
    expect(min).toBe(0)
    expect(max).toBe(SLOT_COUNT - 1)
    expect(seen.size).toBeGreaterThan(16_000)
  })
})

describe('hashTag', () => {
  it('returns the text between the first { and the first } after it', () => {
    expect(hashTag('{user1000}.following')).toBe('user1000')
    expect(hashTag('foo{{bar}}zap')).toBe('{bar')
    expect(hashTag('foo{bar}{zap}')).toBe('bar')
    expect(hashTag('{😀}x')).toBe('😀')
    expect(hashTag(Buffer.from('a{ключ}b'))).toBe('ключ')
  })

  it('returns undefined when the whole key is hashed', () => {
    for (const key of ['foo', '', '{', '}', '{}', '}{', '{a', 'a}', 'foo{}{bar}']) {
      expect(hashTag(key), key).toBeUndefined()
    }
    expect(hashTag('{{}}')).toBe('{')
  })
})
