import { describe, expect, it } from 'vitest'
import { busChannel, entryKeys, entryPattern, valueKey } from '../../src/cache/cache-keys.js'
import { keySlot } from '../../src/cluster/slot.js'

describe('cache keys', () => {
  it.each(['user:1', '}', '}x{', '{', '{a}', 'a}b', '', ' ', 'ü{}', '*?[]\\'])(
    'puts the value and lease keys of %j in one slot',
    (key) => {
      const k = entryKeys('app', key)
      expect(keySlot(k.value)).toBe(keySlot(k.lease))
      expect(valueKey('app', key)).toBe(k.value)
      expect(k.value).not.toBe(k.lease)
    },
  )

  it('spreads different entries over different slots', () => {
    const slots = new Set(Array.from({ length: 200 }, (_, i) => keySlot(entryKeys('app', `item:${i}`).value)))
    expect(slots.size).toBeGreaterThan(190)
  })

  it('matches entry keys of a key prefix literally in SCAN patterns', () => {
    expect(entryPattern('app', 'user:*[1]?')).toBe('{app:user:\\*\\[1\\]\\?*')
    expect(entryKeys('app', 'user:1').value.startsWith('{app:user:')).toBe(true)
    expect(busChannel('app')).toBe('app:bus')
  })
})
