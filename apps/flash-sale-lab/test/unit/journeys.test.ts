// The direct crowd journey against a scripted checkout: the double click at the opening, where
// the first request of the pair is told SALE_NOT_STARTED while its twin (same key) reserves.
// The order of the two answers is the one thing a real stack cannot be made to repeat, so the
// script fixes it here; load-waiting-room.test.ts shows the same crowd on the real stack.
import { describe, expect, it } from 'vitest'
import { type Answer, directJourney, type JourneyContext, newUser } from '../../src/load/journeys.js'
import { type LoadOptions, resolveLoadOptions } from '../../src/load/load-options.js'
import type { LoadUser } from '../../src/load/result.js'

interface Sent {
  key: string | undefined
}

/**
 * A checkout whose sale opens at the user's 2nd request: the 1st is SALE_NOT_STARTED (not kept
 * under its key), the 2nd reserves order 'o-1' (kept under its key), later ones replay it with
 * the same key or answer ALREADY_PURCHASED naming it.
 */
function scriptedCheckout(options: LoadOptions) {
  const sent: Sent[] = []
  const kept = new Map<string, Answer>()
  let bought = false
  const ctx: JourneyContext = {
    options: resolveLoadOptions({ mode: 'crowd', retryDelayMs: [0, 0], patienceMs: 10_000, ...options }),
    async call(_op, _user, request) {
      const key = request.headers?.['idempotency-key']
      sent.push({ key })
      const replay = key === undefined ? undefined : kept.get(key)
      if (replay) return replay
      if (sent.length === 1)
        return { status: 409, code: 'SALE_NOT_STARTED', body: { error: { code: 'SALE_NOT_STARTED' } } }
      if (bought)
        return {
          status: 409,
          code: 'ALREADY_PURCHASED',
          body: { error: { code: 'ALREADY_PURCHASED', order_id: 'o-1' } },
        }
      bought = true
      const answer: Answer = { status: 200, code: undefined, body: { order_id: 'o-1', status: 'reserved' } }
      if (key !== undefined) kept.set(key, answer)
      return answer
    },
    pause: async () => {},
    stopped: () => false,
    now: () => 0,
    retried: () => {},
  }
  return { ctx, sent }
}

async function journey(options: LoadOptions): Promise<{ user: LoadUser; sent: Sent[] }> {
  const { ctx, sent } = scriptedCheckout(options)
  const user = newUser(7, 0)
  await directJourney(ctx, user)
  return { user, sent }
}

describe('directJourney, a double click at the opening', () => {
  it('keeps its Idempotency-Key after SALE_NOT_STARTED: the next click gets the order its twin reserved', async () => {
    const { user, sent } = await journey({ doubleClickRatio: 1, repeatRatio: 1, maxRetries: 5 })
    expect(user).toMatchObject({ outcome: 'purchased', order_id: 'o-1', reason: null })
    expect(sent).toHaveLength(3)
    expect(new Set(sent.map((s) => s.key)).size).toBe(1)
    expect(sent[0]!.key).toMatch(/.+/)
  })

  it('without keys, is told ALREADY_PURCHASED with its own order: a buyer, reason already_purchased', async () => {
    const { user, sent } = await journey({
      doubleClickRatio: 1,
      repeatRatio: 1,
      maxRetries: 5,
      idempotencyKeys: false,
    })
    expect(user).toMatchObject({ outcome: 'purchased', order_id: 'o-1', reason: 'already_purchased' })
    expect(sent).toEqual([{ key: undefined }, { key: undefined }, { key: undefined }])
  })

  it('ALREADY_PURCHASED without an order id stays already_purchased', async () => {
    const { ctx } = scriptedCheckout({ doubleClickRatio: 0, repeatRatio: 0 })
    ctx.call = async () => ({
      status: 409,
      code: 'ALREADY_PURCHASED',
      body: { error: { code: 'ALREADY_PURCHASED' } },
    })
    const user = newUser(8, 0)
    await directJourney(ctx, user)
    expect(user).toMatchObject({ outcome: 'already_purchased', order_id: null, reason: 'ALREADY_PURCHASED' })
  })
})
