import { describe, expect, it } from 'vitest'
import { CacheEmitter } from '../../src/cache/cache-events.js'
import type { ResolvedEntryOptions } from '../../src/cache/cache-options.js'
import { EntryCodec } from '../../src/cache/entry-codec.js'
import { copyJson } from '../../src/cache/json-copy.js'
import type { Serializer } from '../../src/cache/serializer.js'
import { encodeEntry, jsonSerializer } from '../../src/cache/serializer.js'

const TEXTS = [
  '{"id":"item:1","name":"Product","price":19.99,"tags":["red","large"],"nested":{"a":[1,{"b":null}]}}',
  '[[],[[]],{},[{}],[1,"2",true,false,null]]',
  '{"2":"integer keys first","b":1,"1":"then","a":{"z":1,"y":[-0,1e308,-1.5]}}',
  '{"__proto__":{"polluted":true},"constructor":{"prototype":1},"x":{"__proto__":[1]}}',
  '{"emoji":"😀","nul":"a\\u0000b","lone":"\\ud800"}',
  '"a string"',
  '42',
  'null',
  'true',
]

/** Every object and array reachable from `v`. */
function containers(v: unknown, out: unknown[] = []): unknown[] {
  if (typeof v !== 'object' || v === null) return out
  out.push(v)
  for (const x of Object.values(v)) containers(x, out)
  return out
}

/**
 * Deep equality with the same own keys in the same order and the same prototypes. Not
 * toStrictEqual: it reads `constructor`, which is an own key in one of the texts.
 */
function sameJson(a: unknown, b: unknown): boolean {
  if (typeof a !== 'object' || a === null || typeof b !== 'object' || b === null) return Object.is(a, b)
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false
  const ka = Reflect.ownKeys(a)
  const kb = Reflect.ownKeys(b)
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false
  return ka.every((k) => {
    const da = Object.getOwnPropertyDescriptor(a, k)!
    const db = Object.getOwnPropertyDescriptor(b, k)!
    return da.enumerable === db.enumerable && da.writable === db.writable && sameJson(da.value, db.value)
  })
}

describe('copyJson', () => {
  it.each(TEXTS)('copies %s to exactly what JSON.parse gives, sharing no object', (text) => {
    const template = JSON.parse(text)
    const copy = copyJson(template)
    const parsed = JSON.parse(text)
    expect(sameJson(copy, parsed)).toBe(true)
    // Same own keys in the same order, at every level (toStrictEqual ignores key order).
    expect(JSON.stringify(copy)).toBe(JSON.stringify(parsed))
    const shared = containers(copy).filter((c) => containers(template).includes(c))
    expect(shared).toEqual([])
  })

  it('keeps a "__proto__" key an own property and leaves the prototype alone', () => {
    const copy = copyJson(JSON.parse('{"__proto__":{"polluted":true}}')) as Record<string, unknown>
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype)
    expect(Object.hasOwn(copy, '__proto__')).toBe(true)
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined()
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined()
  })
})

describe('EntryCodec L1 values', () => {
  const opts: ResolvedEntryOptions = {
    ttlMs: 60_000,
    graceMs: 0,
    softTimeoutMs: 0,
    hardTimeoutMs: 1000,
    beta: 0,
    jitter: 0,
    negativeTtlMs: 0,
  }
  const codec = (serializer: Serializer, l1Serialize = true) =>
    new EntryCodec(serializer, l1Serialize, new CacheEmitter())
  const entryOf = (c: EntryCodec, value: unknown) => {
    const encoded = c.encode('k', value, opts, 0)!
    return c.toL1(c.decode('k', encoded.raw)!)
  }

  it('gives every hit its own deep copy: a caller mutating its value changes nobody else’s', () => {
    const c = codec(jsonSerializer)
    const e = entryOf(c, { tags: ['a'], nested: { n: 1 } })
    const first = c.valueFromL1<{ tags: string[]; nested: { n: number } }>(e)!
    first.tags.push('mutated')
    first.nested.n = 99
    const second = c.valueFromL1<{ tags: string[]; nested: { n: number } }>(e)!
    expect(second).toEqual({ tags: ['a'], nested: { n: 1 } })
    expect(second).not.toBe(first)
    expect(c.fromL1(e).value).toEqual({ tags: ['a'], nested: { n: 1 } })
  })

  it('serves primitives, null and a cached "not found" as they were stored', () => {
    const c = codec(jsonSerializer)
    for (const v of ['text', 0, false, null]) {
      const e = entryOf(c, v)
      expect(c.valueFromL1(e)).toBe(v)
      expect(c.valueFromL1(e)).toBe(v)
    }
    const missing = c.toL1(c.decode('k', c.encode('k', undefined, { ...opts, negativeTtlMs: 1000 }, 0)!.raw)!)
    expect(c.valueFromL1(missing)).toBeUndefined()
  })

  it('parses nesting too deep to copy recursively instead of failing', () => {
    const c = codec(jsonSerializer)
    const depth = 50_000
    // Written by some other process: JSON.stringify could not have made it (it recurses too).
    const raw = encodeEntry('v', Date.now() + 60_000, 0, 0, '['.repeat(depth) + ']'.repeat(depth))
    const e = c.toL1(c.decode('k', raw)!)
    const value = c.valueFromL1<unknown[]>(e)
    let level = 0
    for (let v: unknown = value; Array.isArray(v); v = v[0]) level++
    expect(level).toBe(depth)
  })

  it('calls a custom serializer on every hit, and shares the object when l1Serialize is off', () => {
    let calls = 0
    const custom: Serializer = {
      serialize: (v) => JSON.stringify(v),
      deserialize: (t) => {
        calls++
        return JSON.parse(t)
      },
    }
    const c = codec(custom)
    const e = entryOf(c, { a: 1 })
    const before = calls
    expect(c.valueFromL1(e)).toEqual({ a: 1 })
    expect(c.valueFromL1(e)).toEqual({ a: 1 })
    expect(calls - before).toBe(2)

    const byRef = codec(jsonSerializer, false)
    const value = { a: 1 }
    const r = byRef.toL1({ value, expiresAt: 1, staleUntil: 1, deltaMs: 0, payload: '{"a":1}' })
    expect(byRef.valueFromL1(r)).toBe(value)
  })
})
