// Order ids are drawn from a pool of random bytes (one randomBytes() per 512 ids): each id must
// still be unique, of the documented form, and routable to its sale.
import { describe, expect, it } from 'vitest'
import { newOrderId, orderIdTime, productOfOrder } from '../../src/domain/ids.js'

describe('newOrderId', () => {
  it('unique across several pool refills, 12 random base64url characters, routable to the sale', () => {
    const ids = Array.from({ length: 5_000 }, (_, i) => newOrderId(i % 2 ? '9921' : 'sale_A-1'))
    expect(new Set(ids).size).toBe(ids.length)
    // The random parts too: no byte of the pool is used twice.
    expect(new Set(ids.map((id) => id.slice(-12))).size).toBe(ids.length)
    for (const [i, id] of ids.entries()) {
      expect(id).toMatch(/^[A-Za-z0-9_-]+\.[0-9a-z]+[A-Za-z0-9_-]{12}$/)
      expect(productOfOrder(id)).toBe(i % 2 ? '9921' : 'sale_A-1')
    }
  })
})

describe('orderIdTime', () => {
  it('reads the time an id was made from its time part; anything else is undefined', () => {
    const before = Date.now()
    const id = newOrderId('9921')
    const t = orderIdTime(id)!
    expect(t).toBeGreaterThanOrEqual(before)
    expect(t).toBeLessThanOrEqual(Date.now())
    for (const bad of [
      '9921.',
      '9921.abc',
      '9921.ABCDEFGHIJKLMN',
      '9921.!!AAAAAAAAAAAA',
      '9921.zzzzzzzzzzzzzzzzzAAAAAAAAAAAA',
    ])
      expect(orderIdTime(bad), bad).toBeUndefined()
  })
})
