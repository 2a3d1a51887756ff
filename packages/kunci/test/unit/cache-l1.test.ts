import { describe, expect, it } from 'vitest'
import { L1, type L1Entry } from '../../src/cache/l1.js'

const entry = (data: string): L1Entry => ({ kind: 'v', expiresAt: 1, staleUntil: 1, deltaMs: 0, data })

describe('L1', () => {
  it('evicts the least recently used entry beyond maxEntries', () => {
    const l1 = new L1(2)
    l1.fill('a', entry('a'), l1.mark())
    l1.fill('b', entry('b'), l1.mark())
    l1.get('a') // a is now the most recently used
    l1.fill('c', entry('c'), l1.mark())
    expect(l1.get('b')).toBeUndefined()
    expect(l1.get('a')?.data).toBe('a')
    expect(l1.get('c')?.data).toBe('c')
    expect(l1.size).toBe(2)
  })

  it('refuses a fill that started before an invalidation of its key, a prefix of it, or a clear', () => {
    const l1 = new L1(10)
    let mark = l1.mark()
    l1.invalidate('k')
    l1.fill('k', entry('stale'), mark)
    expect(l1.get('k')).toBeUndefined()
    l1.fill('other', entry('fine'), mark)
    expect(l1.get('other')?.data).toBe('fine')

    mark = l1.mark()
    l1.invalidatePrefix('user:')
    l1.fill('user:1', entry('stale'), mark)
    l1.fill('order:1', entry('fine'), mark)
    expect(l1.get('user:1')).toBeUndefined()
    expect(l1.get('order:1')?.data).toBe('fine')

    mark = l1.mark()
    l1.clear()
    l1.fill('x', entry('stale'), mark)
    expect(l1.get('x')).toBeUndefined()
    expect(l1.size).toBe(0)

    // A fill that starts after the invalidation lands.
    l1.fill('k', entry('new'), l1.mark())
    expect(l1.get('k')?.data).toBe('new')
  })

  it('still refuses old fills after its bookkeeping is reset by many invalidations', () => {
    const l1 = new L1(10)
    const mark = l1.mark()
    for (let i = 0; i < 20_000; i++) l1.invalidate(`k${i}`)
    l1.fill('k1', entry('stale'), mark)
    l1.fill('never-invalidated', entry('also refused: we no longer know'), mark)
    expect(l1.size).toBe(0)
  })

  it('invalidatePrefix drops every matching entry', () => {
    const l1 = new L1(10)
    for (const k of ['user:1', 'user:2', 'users', 'order:1']) l1.fill(k, entry(k), l1.mark())
    l1.invalidatePrefix('user:')
    expect(['user:1', 'user:2', 'users', 'order:1'].map((k) => l1.get(k)?.data)).toEqual([
      undefined,
      undefined,
      'users',
      'order:1',
    ])
  })
})
