import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import {
  DomainRefusalError,
  insufficientFunds,
  invalidInput,
  RESERVE_CODES,
  type RefusalCode,
  saleRefusal,
} from '../../src/domain/refusals.js'
import { fromRefusal, HTTP_STATUS, invalid, refusalBody } from '../../src/routes/api-error.js'

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

// The waiting room throws DomainRefusalError; the HTTP layer must answer it exactly as it
// answered the ApiError the room used to throw itself (same status, Retry-After, body fields).
describe("the waiting room's refusals", () => {
  it('map to the same HTTP answer as before', () => {
    const urls = { join_url: '/v1/sales/7/queue', page_url: '/queue/7' }
    const err = new DomainRefusalError({
      code: 'WAITING_ROOM',
      message: 'join',
      details: urls,
      retryAfterS: 1,
    })
    expect(err).toMatchObject({ code: 'WAITING_ROOM', details: urls, retryAfterS: 1 })
    expect(fromRefusal(err.refusal)).toMatchObject({
      code: 'WAITING_ROOM',
      status: 429,
      message: 'join',
      details: urls,
      retryAfterS: 1,
    })
    expect(refusalBody(err.refusal)).toEqual({ error: { code: 'WAITING_ROOM', message: 'join', ...urls } })
    const bad = fromRefusal(invalidInput('waiting_room.max_admitted', 'an integer'))
    const before = invalid('waiting_room.max_admitted', 'an integer')
    expect({ ...bad, status: bad.status, message: bad.message }).toEqual({
      ...before,
      status: before.status,
      message: before.message,
    })
  })
})
