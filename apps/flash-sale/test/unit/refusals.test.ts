import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { insufficientFunds, RESERVE_CODES, type RefusalCode, saleRefusal } from '../../src/domain/refusals.js'
import { fromRefusal, HTTP_STATUS } from '../../src/routes/api-error.js'

// One table of reserve codes (domain/refusals.ts): reserve.lua's header lists the same codes,
// and every refusal has an HTTP status, given only by the HTTP layer.
describe('the reserve codes', () => {
  it('are the ones reserve.lua says it returns', () => {
    const lua = readFileSync(new URL('../../src/sale/scripts/reserve.lua', import.meta.url), 'utf8')
    const header = /code one of ([A-Z_,\s-]+?)\./s.exec(lua)?.[1] ?? ''
    const inLua = header
      .split(/[,\s]+/)
      .filter((w) => /^[A-Z_]+$/.test(w))
      .sort()
    expect(inLua).toEqual([...RESERVE_CODES].sort())
    // And the script returns nothing else.
    const returned = [...lua.matchAll(/(?:answer\(|return \{ )'([A-Z_]+)'/g)].map((m) => m[1])
    for (const code of returned) expect(RESERVE_CODES).toContain(code)
  })

  it('each refusal has its status and body in the HTTP layer', () => {
    const codes: RefusalCode[] = [
      ...RESERVE_CODES.filter((c) => c !== 'RESERVED'),
      'BUSY',
      'UNAVAILABLE',
      'INSUFFICIENT_FUNDS',
    ] as RefusalCode[]
    for (const code of codes) expect(HTTP_STATUS[code], code).toBeGreaterThanOrEqual(400)
    const err = fromRefusal(saleRefusal('ALREADY_PURCHASED', '9921', '9921.abc'))
    expect(err).toMatchObject({ code: 'ALREADY_PURCHASED', status: 409, details: { order_id: '9921.abc' } })
    expect(fromRefusal(saleRefusal('SOLD_OUT', '9921')).details).toEqual({})
    expect(fromRefusal(insufficientFunds('9921', 4999))).toMatchObject({
      code: 'INSUFFICIENT_FUNDS',
      status: 402,
    })
  })
})
