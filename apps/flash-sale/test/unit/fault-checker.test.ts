import { describe, expect, it } from 'vitest'
import { check } from '../support/fault-generator/checker.js'
import type { Facts, OrderRow } from '../support/fault-generator/facts.js'
import { Prng, planSeed } from '../support/fault-generator/generator.js'
import type { Attempt, History } from '../support/fault-generator/history.js'

// The fault generator's checker fails when a promise is broken (a checker that never fails proves
// nothing): one history per broken promise, built by hand, each found; and the seeded plan is the
// same for the same seed.

const T0 = 1_000_000
const answer = (status: number, extra: Partial<Attempt> = {}): Attempt => ({
  sentAt: T0,
  ms: 5,
  status,
  code: undefined,
  orderId: undefined,
  bodyStatus: undefined,
  ...extra,
})
const row = (order_id: string, status: string, extra: Partial<OrderRow> = {}): OrderRow => ({
  order_id,
  product_id: '1',
  round: 1,
  user_id: '7',
  unit_no: 1,
  status,
  failure_reason: null,
  pay_by_ms: null,
  ...extra,
})
const plan = planSeed(1, { loadMs: 1_000, clients: 1, firstUser: 7, users: 3, faults: { 'kill-worker': 1 } })

function base(): { h: History; f: Facts } {
  return {
    h: {
      seed: 1,
      calls: [],
      rounds: [
        { productId: '1', round: 1, stock: 1, perUserLimit: 1, payment: 'instant', startedAt: 0, endedAt: 1 },
      ],
      faults: [],
    },
    f: {
      sqlReadAtMs: 0,
      orders: new Map(),
      payments: [],
      refunds: [],
      wallets: [],
      restocks: [],
      sales: [{ product_id: '1', round: 1, stock_total: 1, sold: 1, per_user_limit: 1 }],
      buyers: new Map(),
      polled: new Map(),
      reconcile: { code: 0, problems: [], out: '' },
    },
  }
}
const properties = (h: History, f: Facts) => [
  ...new Set(check(plan, h, f, { reconcileMustExit0: true }).map((b) => b.property)),
]

describe('fault generator checker', () => {
  it('a clean history breaks nothing', () => {
    const { h, f } = base()
    h.calls.push({
      kind: 'checkout',
      productId: '1',
      userId: 7,
      key: 'k',
      repeat: false,
      attempts: [answer(200, { orderId: 'a' })],
    })
    f.orders.set('a', row('a', 'confirmed'))
    f.payments.push({ order_id: 'a', user_id: '7', amount_cents: 100 })
    f.buyers.set('1', { '7': '1|a|a' })
    f.polled.set('a', 'confirmed')
    expect(check(plan, h, f, { reconcileMustExit0: true })).toEqual([])
  })

  it('finds a 200 failed duplicate_unit, one key with two answers, an oversold round, a 500', () => {
    const { h, f } = base()
    h.calls.push({
      kind: 'checkout',
      productId: '1',
      userId: 7,
      key: 'k',
      repeat: false,
      attempts: [answer(500), answer(200, { orderId: 'a' }), answer(409, { code: 'SOLD_OUT' })],
    })
    h.calls.push({
      kind: 'checkout',
      productId: '1',
      userId: 8,
      key: undefined,
      repeat: false,
      attempts: [answer(200, { orderId: 'b' })],
    })
    h.calls.push({
      kind: 'checkout',
      productId: '1',
      userId: 9,
      key: undefined,
      repeat: false,
      attempts: [answer(200, { orderId: 'c' })],
    })
    f.orders.set('a', row('a', 'failed', { failure_reason: 'duplicate_unit' }))
    f.orders.set('b', row('b', 'confirmed', { user_id: '8' }))
    f.orders.set('c', row('c', 'confirmed', { user_id: '9' }))
    expect(properties(h, f).sort()).toEqual(
      [
        '200-ends-live',
        'charged-once',
        'no-5xx',
        'not-oversold',
        'one-key-one-answer',
        'redis-buyers',
      ].sort(),
    )
  })

  it('a 202 dropped outside a failover breaks its promise; inside one it does not', () => {
    const { h, f } = base()
    h.calls.push({
      kind: 'checkout',
      productId: '1',
      userId: 7,
      key: undefined,
      repeat: false,
      attempts: [answer(202, { orderId: 'x' })],
    })
    expect(properties(h, f)).toEqual(['202-resolves'])
    h.faults.push({
      kind: 'kill-master',
      productId: '1',
      node: 'n',
      startedAt: T0 - 500,
      endedAt: T0 + 500,
      failover: true,
      detail: '',
    })
    expect(properties(h, f)).toEqual([])
  })

  it('the same seed plans the same run', () => {
    const o = {
      loadMs: 45_000,
      clients: 8,
      firstUser: 1,
      users: 40,
      faults: { 'kill-worker': 1, 'kill-master': 1 },
    }
    expect(planSeed(42, o)).toEqual(planSeed(42, o))
    expect(planSeed(42, o)).not.toEqual(planSeed(43, o))
    expect(new Prng(5).uuid()).toBe(new Prng(5).uuid())
  })
})
