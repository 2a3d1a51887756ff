import { describe, expect, it } from 'vitest'
import { parseDemoArgs } from '../../src/cli/demo.js'
import { resolveDemoOptions } from '../../src/demo/demo-options.js'
import { checkMoneyPhase, type MoneyContext, type MoneyLedger } from '../../src/demo/money-checker.js'
import { balanceOf, moneyLoadOptions } from '../../src/demo/money-phases.js'
import { phasePlans, selectPhases } from '../../src/demo/scenario.js'
import { formatMoney } from '../../src/demo/summary-table.js'
import { resolveLoadOptions } from '../../src/load/load-options.js'
import type { LoadOrder, LoadUser } from '../../src/load/result.js'
import { moneyRows } from '../../src/report/money-card.js'

// A sale of 3 units at 10.00 (cents below), 5 users: u1..u3 funded for one unit, u4 and u5 short.
// u4 reserved first and failed INSUFFICIENT_FUNDS (its unit went back), u1..u3 bought the 3 units;
// u5 was told sold out. Books: reserved 4 = sold 3 + returned 1; stock 3 = sold 3 + remaining 0.
const orders = (...rows: [string, string, string][]) =>
  new Map(rows.map(([id, user, status]) => [id, { user, status }]))

function ledger(extra: Partial<MoneyLedger> = {}): MoneyLedger {
  return {
    round: 1,
    payment: 'instant',
    stockTotal: 3,
    sold: 3,
    returned: 1,
    orders: orders(
      ['o4', 'u4', 'failed'],
      ['o1', 'u1', 'confirmed'],
      ['o2', 'u2', 'confirmed'],
      ['o3', 'u3', 'confirmed'],
    ),
    byStatus: { confirmed: 3, 'failed:INSUFFICIENT_FUNDS': 1 },
    returnsDone: 1,
    returnsPending: 0,
    returnsMissing: 0,
    usersTwice: 0,
    paidWithoutPayment: 0,
    paymentsForUnpaid: 0,
    doubleCharges: 0,
    wallets: {
      count: 5,
      balanceCents: 2 * 999,
      minBalanceCents: 0,
      fundedCents: 3 * 1000 + 2 * 999,
      chargedCents: 3000,
      refundedCents: 0,
      unbalanced: 0,
      paymentsCents: 3000,
    },
    ...extra,
  }
}
const ctx = (extra: Partial<MoneyContext> = {}): MoneyContext => ({
  remaining: 0,
  setCents: 3 * 1000 + 2 * 999,
  users: 5,
  price: 10,
  ...extra,
})
const order = (order_id: string, user_id: string): LoadOrder =>
  ({ order_id, user_id, status: 200 }) as unknown as LoadOrder
const load = {
  orders: [order('o4', 'u4'), order('o1', 'u1'), order('o2', 'u2'), order('o3', 'u3'), order('o3', 'u3')],
  users: [] as LoadUser[],
}

describe('the money checker', () => {
  it('passes balanced books and reports the figures of the card', () => {
    const check = checkMoneyPhase(load, ledger(), ctx())
    expect(check.violations).toEqual([])
    expect(check).toMatchObject({ sold: 4, persisted: 4, oversold: 0, lost: 0 })
    expect(check.money).toMatchObject({
      stock: 3,
      reserved: 4,
      sold: 3,
      paid: 3,
      failedFunds: 1,
      returned: 1,
      remaining: 0,
      balances: { sum: 19.98, min: 0 },
      stockBalanced: true,
      returnsBalanced: true,
    })
    const rows = Object.fromEntries(moneyRows(check.money))
    expect(rows['stock = sold + remaining + pending']).toBe('3 = 3 + 0 + 0 ✓')
    expect(rows['reserved = sold + returned + pending']).toBe('4 = 3 + 1 + 0 ✓')
    expect(rows['balances: sum · min']).toBe('19.98 · 0.00')
  })

  it('fails a unit returned twice in Redis (remaining one too high)', () => {
    const check = checkMoneyPhase(
      load,
      ledger({ sold: 2, byStatus: { confirmed: 2, 'failed:INSUFFICIENT_FUNDS': 1 } }),
      ctx({ remaining: 2 }),
    )
    expect(check.money.stockBalanced).toBe(false)
    expect(check.violations.join('\n')).toMatch(/stock 3 ≠ sold 2 \+ remaining 2 \+ pending 0/)
  })

  it('fails a unit never given back, and one counted twice in sales.returned', () => {
    const lostUnit = checkMoneyPhase(load, ledger({ returned: 0, returnsDone: 0, returnsMissing: 1 }), ctx())
    expect(lostUnit.money.returnsBalanced).toBe(false)
    expect(lostUnit.violations.join('\n')).toMatch(/reserved 4 ≠ sold 3 \+ returned 0.*\n.*never returned/s)
    const twice = checkMoneyPhase(load, ledger({ returned: 2 }), ctx())
    expect(twice.violations.join('\n')).toMatch(/sales\.returned is 2 but 1 order/)
  })

  it('fails a negative balance, books that do not add up, and a charge for an order that failed', () => {
    const check = checkMoneyPhase(
      load,
      ledger({
        paymentsForUnpaid: 1,
        wallets: { ...ledger().wallets, minBalanceCents: -999, balanceCents: 999 - 999, unbalanced: 1 },
      }),
      ctx(),
    )
    const text = check.violations.join('\n')
    expect(text).toMatch(/a balance below zero: -9\.99/)
    expect(text).toMatch(/1 wallet\(s\) with balance ≠ funded − charged \+ refunded/)
    expect(text).toMatch(/balances sum to 0\.00, but 49\.98 was put in and 30\.00 paid/)
    expect(text).toMatch(/1 payment\(s\) for orders that did not end paid/)
    expect(check.doubleCharges).toBe(1)
  })

  it('fails a 200 that never reached SQL, an oversell, and a held order that never expired', () => {
    const lost = checkMoneyPhase({ ...load, orders: [...load.orders, order('o9', 'u5')] }, ledger(), ctx())
    expect(lost.lost).toBe(1)
    const held = ledger({
      payment: 'hold',
      sold: 4,
      returned: 0,
      returnsDone: 0,
      byStatus: { paid: 3, reserved: 1 },
      orders: orders(
        ['o4', 'u4', 'reserved'],
        ['o1', 'u1', 'paid'],
        ['o2', 'u2', 'paid'],
        ['o3', 'u3', 'paid'],
      ),
    })
    const check = checkMoneyPhase(load, held, ctx({ remaining: -1, holdSeconds: 2 }))
    expect(check.oversold).toBe(1)
    expect(check.violations.join('\n')).toMatch(
      /oversold 1 unit.*\n(.*\n)*.*1 order\(s\) still reserved after their pay_by/,
    )
  })

  it('counts a unit promised that SQL did not have (sold_out_in_sql, naive) as oversold, not returned', () => {
    const phantom = ledger({
      byStatus: { confirmed: 3, 'failed:INSUFFICIENT_FUNDS': 1, 'failed:sold_out_in_sql': 2 },
    })
    const check = checkMoneyPhase(load, phantom, ctx())
    expect(check.oversold).toBe(2)
    expect(check.money.failedOther).toEqual({ sold_out_in_sql: 2 })
    expect(check.money.returnsBalanced).toBe(true)
    expect(check.violations).toEqual([
      'oversold 2 unit(s): reserved for buyers, then failed sold_out_in_sql (SQL had no unit left)',
    ])
  })

  it('checks what held-order buyers were told against SQL', () => {
    const user = (id: string, order_id: string, payment: LoadUser['payment']): LoadUser => ({
      user_id: id as unknown as number,
      arrivedMs: 0,
      admittedMs: null,
      position: null,
      lineKey: null,
      outcome: 'purchased',
      outcomeMs: 0,
      reason: null,
      order_id,
      requests: 2,
      payment,
    })
    const held = ledger({
      payment: 'hold',
      byStatus: { paid: 3, cancelled: 1 },
      orders: orders(
        ['o4', 'u4', 'cancelled'],
        ['o1', 'u1', 'paid'],
        ['o2', 'u2', 'paid'],
        ['o3', 'u3', 'expired'],
      ),
    })
    const users = [user('u4', 'o4', 'cancelled'), user('u1', 'o1', 'paid'), user('u3', 'o3', 'paid')]
    const check = checkMoneyPhase({ ...load, users }, held, ctx({ holdSeconds: 2 }))
    expect(check.money.payments).toEqual({ cancelled: 1, paid: 2 })
    expect(check.violations).toContain('1 user(s) told "paid" whose order is not paid')
  })
})

describe('the money phases of the scenario', () => {
  it('are in every profile, selectable with --phases money, and their crowd pays later only when held', () => {
    for (const profile of ['quick', 'default', 'full'] as const) {
      const money = selectPhases(phasePlans(profile), ['money'])
      expect(money.map((p) => p.id)).toEqual(['money-instant', 'money-hold'])
      const [instant, hold] = money
      // Short wallets cannot pay the price; funded ones pay exactly one unit.
      const m = instant!.money!
      expect(balanceOf(m, 2)).toBeLessThan(m.price)
      expect(balanceOf(m, 0)).toBe(m.price)
      expect(
        resolveLoadOptions({ ...moneyLoadOptions(instant!), stages: instant!.stages }).afterReserved,
      ).toBeNull()
      const opts = resolveLoadOptions({ ...moneyLoadOptions(hold!), stages: hold!.stages })
      expect(opts.afterReserved).toMatchObject({ payRatio: 0.6, cancelRatio: 0.2 })
      expect(opts.userIdMax - opts.userIdMin + 1).toBe(hold!.users)
      // Distinct users: no other phase's charges in their books.
      expect(instant!.money!.userIdMin + instant!.users).toBeLessThanOrEqual(hold!.money!.userIdMin)
    }
  })

  it('--phases: ids or their start, checked against the profile', () => {
    expect(parseDemoArgs(['--phases', 'money, storm-100']).options.phases).toEqual(['money', 'storm-100'])
    expect(resolveDemoOptions({ profile: 'quick', phases: ['money', 'sale-1000'] }).phases).toEqual([
      'money',
      'sale-1000',
    ])
    expect(() => resolveDemoOptions({ profile: 'default', phases: ['sale-1000'] })).toThrow(
      /no phase 'sale-1000' in profile default; use sale-100, sale-5000, storm-100/,
    )
    expect(() => resolveDemoOptions({ phases: [] })).toThrow(/--phases/)
    expect(selectPhases(phasePlans('quick'), ['sale']).map((p) => p.id)).toEqual(['sale-100', 'sale-1000'])
    expect(resolveDemoOptions({}).phases).toBeUndefined()
  })

  it('refuses afterReserved outside the crowd mode, and ratios above 1', () => {
    const afterReserved = { payRatio: 0.7, cancelRatio: 0.4, delayMs: [0, 10] as [number, number] }
    expect(() => resolveLoadOptions({ mode: 'crowd', afterReserved, userIdMax: 1000 })).toThrow(/at most 1/)
    expect(() => resolveLoadOptions({ afterReserved: { ...afterReserved, cancelRatio: 0.1 } })).toThrow(
      /needs mode 'crowd'/,
    )
  })

  it('prints the books per sale and the sales a strategy refused', () => {
    const check = checkMoneyPhase(load, ledger(), ctx())
    const lines = formatMoney({
      strategy: 'redlock',
      phases: [{ id: 'money-instant', money: check.money } as never],
      moneySkipped: [{ phase: 'money-hold', reason: 'not run: 400 INVALID_REQUEST' }],
    })
    expect(lines.join('\n')).toMatch(/money-instant[\s\S]*paid\s+3[\s\S]*money-hold: not run: 400/)
  })
})
