import { describe, expect, it } from 'vitest'
import { decodeEntry, encodeEntry, jsonSerializer } from '../../src/cache/serializer.js'

describe('cache entry encoding', () => {
  it('round-trips the header and a payload that itself contains colons', () => {
    const raw = encodeEntry('v', 1_700_000_000_123, 500, 42, '{"a":"b:c"}')
    expect(decodeEntry(raw)).toEqual({
      kind: 'v',
      expiresAt: 1_700_000_000_123,
      graceMs: 500,
      deltaMs: 42,
      payload: '{"a":"b:c"}',
    })
  })

  it('keeps a cached null, a cached "not found" and an empty string apart', () => {
    expect(decodeEntry(encodeEntry('v', 1, 0, 0, 'null'))).toMatchObject({ kind: 'v', payload: 'null' })
    expect(decodeEntry(encodeEntry('n', 1, 0, 0, ''))).toMatchObject({ kind: 'n', payload: '' })
    expect(decodeEntry(encodeEntry('v', 1, 0, 0, '""'))).toMatchObject({ kind: 'v', payload: '""' })
  })

  it.each([
    '',
    'x1:2:3:',
    'v',
    'v1:2:3',
    'v:1:2:x',
    'va:1:2:x',
    'v1:b:2:x',
    'v1:2:c:x',
    'v-1:2:3:x',
    'v1e3:0:0:x',
    `v${'9'.repeat(17)}:0:0:x`,
    '{"json":1}',
  ])('rejects foreign text %j', (raw) => {
    expect(decodeEntry(raw)).toBeUndefined()
  })
})

describe('jsonSerializer', () => {
  it('throws on what JSON cannot represent instead of caching nothing', () => {
    const circular: Record<string, unknown> = {}
    circular.self = circular
    for (const bad of [10n, circular, () => 1, Symbol('s'), undefined]) {
      expect(() => jsonSerializer.serialize(bad)).toThrow(TypeError)
    }
  })

  it('round-trips JSON values including null', () => {
    for (const v of [null, 0, '', 'x', [1, null], { a: { b: [true] } }]) {
      expect(jsonSerializer.deserialize(jsonSerializer.serialize(v))).toEqual(v)
    }
  })
})
