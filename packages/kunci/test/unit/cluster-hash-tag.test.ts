import { describe, expect, it } from 'vitest'
import { groupBySlot, sameSlot, taggedKey } from '../../src/cluster/hash-tag.js'
import { hashTag, keySlot } from '../../src/cluster/slot.js'
import { InvalidOptionError } from '../../src/errors.js'

function thrown(fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected a throw')
}

describe('taggedKey', () => {
  it('builds {tag}:part keys that share the slot of the tag', () => {
    expect(taggedKey('product:9921', 'stock')).toBe('{product:9921}:stock')
    expect(taggedKey('product:9921')).toBe('{product:9921}')
    expect(taggedKey('sale:42', 'orders', '7')).toBe('{sale:42}:orders:7')
    const keys = [taggedKey('product:9921', 'stock'), taggedKey('product:9921', 'reserved', 'u1')]
    expect(sameSlot(keys)).toBe(true)
    expect(keySlot(keys[0]!)).toBe(keySlot('product:9921'))
    expect(hashTag(keys[1]!)).toBe('product:9921')
  })

  it('allows braces in parts, which cannot move the tag', () => {
    const key = taggedKey('t', '{x}')
    expect(key).toBe('{t}:{x}')
    expect(keySlot(key)).toBe(keySlot('t'))
  })

  it('rejects an empty tag, a tag with braces, and empty parts', () => {
    for (const tag of ['', '{a', 'a}', '{}', 'a{b}c']) {
      const err = thrown(() => taggedKey(tag, 'x'))
      expect(err, tag).toBeInstanceOf(InvalidOptionError)
      expect((err as InvalidOptionError).code).toBe('E_INVALID_OPTION')
      expect((err as InvalidOptionError).option).toBe('tag')
    }
    const err = thrown(() => taggedKey('t', 'a', ''))
    expect(err).toBeInstanceOf(InvalidOptionError)
    expect((err as InvalidOptionError).option).toBe('parts[1]')
    expect(thrown(() => taggedKey(42 as unknown as string))).toBeInstanceOf(InvalidOptionError)
    expect(thrown(() => taggedKey('t', 1 as unknown as string))).toBeInstanceOf(InvalidOptionError)
  })
})

describe('sameSlot', () => {
  it('is true for keys sharing a tag and for zero or one key', () => {
    expect(sameSlot([])).toBe(true)
    expect(sameSlot(['anything'])).toBe(true)
    expect(sameSlot(['{user1000}.following', '{user1000}.followers', Buffer.from('x{user1000}')])).toBe(true)
  })

  it('is false when any key is in another slot', () => {
    expect(keySlot('foo')).not.toBe(keySlot('bar'))
    expect(sameSlot(['foo', 'bar'])).toBe(false)
    expect(sameSlot(['{a}1', '{a}2', '{b}3'])).toBe(false)
    expect(sameSlot(['{a}1', 'x{}a'])).toBe(false)
  })
})

describe('groupBySlot', () => {
  it('puts every key in the group of its slot, in order', () => {
    const keys = Array.from({ length: 2000 }, (_, i) => (i % 3 === 0 ? `{t}:${i}` : `k:${i}`))
    const groups = groupBySlot(keys)
    let total = 0
    for (const [slot, group] of groups) {
      total += group.length
      for (const key of group) expect(keySlot(key)).toBe(slot)
      expect(group).toEqual(keys.filter((k) => keySlot(k) === slot))
    }
    expect(total).toBe(keys.length)
    expect(groups.get(keySlot('t'))!.length).toBeGreaterThanOrEqual(667)
  })
})
