import { describe, expect, it } from 'vitest'
import { History } from '../support/history.js'

// The checker must be able to fail, or the fault tests prove nothing.
describe('History checker', () => {
  it('accepts back-to-back holds with increasing fences', () => {
    const h = new History()
    h.holds.push({ resource: 'r', fence: 1, owner: 'a', start: 0, end: 10 })
    h.holds.push({ resource: 'r', fence: 2, owner: 'b', start: 10, end: 20 })
    h.holds.push({ resource: 's', fence: 1, owner: 'c', start: 5, end: 15 })
    expect(h.violations()).toEqual([])
  })

  it('reports overlapping holds of one resource, even behind a long earlier hold', () => {
    const h = new History()
    h.holds.push({ resource: 'r', fence: 1, owner: 'a', start: 0, end: 100 })
    h.holds.push({ resource: 'r', fence: 2, owner: 'b', start: 100, end: 101 })
    h.holds.push({ resource: 'r', fence: 3, owner: 'c', start: 50, end: 60 })
    const v = h.violations()
    expect(v.filter((x) => x.kind === 'overlap').length).toBeGreaterThanOrEqual(1)
    expect(v.some((x) => x.b.owner === 'c')).toBe(true)
  })

  it('reports fencing tokens that do not increase in grant order', () => {
    const h = new History()
    h.holds.push({ resource: 'r', fence: 5, owner: 'a', start: 0, end: 10 })
    h.holds.push({ resource: 'r', fence: 5, owner: 'b', start: 20, end: 30 })
    expect(h.violations().map((x) => x.kind)).toEqual(['fence-order'])
  })

  it('ends a hold at its validity when the holder never released', () => {
    const h = new History()
    const done = h.begin('r', 1, 'a', 5)
    done(performance.now() + 1000)
    expect(h.holds[0]!.end - h.holds[0]!.start).toBeLessThanOrEqual(5)
  })
})
