import { describe, expect, it } from 'vitest'
import { SendOrder } from '../../src/lock/send-order.js'

// Time far enough apart that every call recomputes (the order is cached for 200 ms).
let clock = 0
const later = () => (clock += 1_000)

describe('SendOrder: the quorum-deciding node is written to first', () => {
  it('keeps index order until round trips are measured', () => {
    const o = new SendOrder(5, 3)
    expect(o.order(later())).toEqual([0, 1, 2, 3, 4])
  })

  it('sends the quorum fastest slowest-first, then the rest fastest-first', () => {
    const o = new SendOrder(5, 3)
    for (const [node, ms] of [
      [0, 1.26],
      [1, 0.74],
      [2, 1.16],
      [3, 0.99],
      [4, 0.85],
    ] as const)
      o.observe(node, ms)
    // By round trip: 1 (0.74), 4 (0.85), 3 (0.99) | 2 (1.16), 0 (1.26).
    expect(o.order(later())).toEqual([3, 4, 1, 2, 0])
  })

  it('ranks unmeasured nodes after the measured ones, in index order', () => {
    const o = new SendOrder(5, 3)
    o.observe(4, 2)
    o.observe(2, 1)
    // By round trip: 2, 4, then unmeasured 0, 1, 3. The third of the quorum is not known, so
    // which node decides is not either: fastest first.
    expect(o.order(later())).toEqual([2, 4, 0, 1, 3])
    o.observe(0, 3)
    expect(o.order(later())).toEqual([0, 4, 2, 1, 3])
  })

  it('follows a node that turns slow, not a single outlier', () => {
    const o = new SendOrder(3, 2)
    for (let i = 0; i < 20; i++) {
      o.observe(0, 1)
      o.observe(1, 2)
      o.observe(2, 3)
    }
    expect(o.order(later())).toEqual([1, 0, 2])
    o.observe(0, 50) // one late reply: 0 stays the fastest (1 ms + 10 %)
    expect(o.order(later())).toEqual([1, 0, 2])
    for (let i = 0; i < 40; i++) o.observe(0, 50)
    expect(o.order(later())).toEqual([2, 1, 0])
  })

  it('changes the order at most every 200 ms', () => {
    const o = new SendOrder(3, 2)
    const t = later()
    expect(o.order(t)).toEqual([0, 1, 2])
    o.observe(2, 1)
    o.observe(1, 2)
    o.observe(0, 3)
    expect(o.order(t + 100)).toEqual([0, 1, 2])
    expect(o.order(t + 200)).toEqual([1, 2, 0])
  })
})
