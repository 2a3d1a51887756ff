// The two crowd journeys (see LoadMode): one user from arrival to a final answer, straight to the
// checkout ('crowd') or through the sale's waiting room ('waiting-room').
//
// Decisions the issue leaves open:
// - In a direct crowd a refusal is 429, 503, no answer, or 409 SALE_NOT_STARTED: a person who came
//   for the opening clicks again. `repeatRatio` of the users do, up to `maxRetries` times, after
//   `retryDelayMs` (or the think time). Every other answer is final. A retry keeps the
//   Idempotency-Key, SALE_NOT_STARTED included: the service keeps a key's final answers, not
//   SALE_NOT_STARTED (docs/flash-sale.md, API), so the same key buys after the opening. A new key
//   there was a second purchase: when the other click of a double click at the opening had
//   reserved under the first key, the new key was told ALREADY_PURCHASED by the user's own order.
// - A user who is told ALREADY_PURCHASED with an order id holds that order: they bought, in this
//   journey (each user of a crowd run is a distinct id on a sale of its own), through a click whose
//   answer the journey did not count (the other request of a double click, a lost answer, or a run
//   without keys). The outcome is 'purchased', its order that order, the reason
//   'already_purchased'; without an order id it stays 'already_purchased'. One outcome per user,
//   so a user counts once however many of their requests reserved or replayed.
// - In the room a user behaves as its page does: polls until a final state, checks out at once
//   when admitted (a double click there too, one Idempotency-Key), retries a 503 or a lost answer
//   with the same key, goes back to polling on 429 NOT_ADMITTED; `repeatRatio` and `maxRetries` do
//   not apply. A user who reads `sold_out` leaves (the room would keep the place in case units came
//   back; a person closes the tab). Both kinds give up after `patienceMs`.
import { randomUUID } from 'node:crypto'
import type { ResolvedLoadOptions } from './load-options.js'
import type { LoadOp, LoadUser, LoadUserOutcome, PaymentOutcome } from './result.js'

/** An HTTP answer; `body` is the parsed JSON (undefined if none). */
export interface Answer {
  status: number
  body: Record<string, unknown> | undefined
  /** `error.code` of a non-2xx JSON answer, else `HTTP_<status>`; undefined for 2xx. */
  code: string | undefined
}

export interface JourneyContext {
  readonly options: ResolvedLoadOptions
  /** Sends one request for `user` (counted in its `requests`); undefined = no HTTP answer. */
  call(
    op: LoadOp,
    user: LoadUser,
    request: { method: 'GET' | 'POST'; path: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<Answer | undefined>
  /** Sleeps, cut short when the run ends. */
  pause(ms: number): Promise<void>
  /** The run is ending: stop at the next step. */
  stopped(): boolean
  /** ms since the run's start. */
  now(): number
  /** Counts a retry in the totals. */
  retried(): void
}

const round = (ms: number) => Math.round(ms * 10) / 10

/** A user record, its arrival stamped with the time its first request is about to be sent. */
export function newUser(userId: number, now: number): LoadUser {
  return {
    user_id: userId,
    arrivedMs: round(now),
    admittedMs: null,
    position: null,
    lineKey: null,
    outcome: 'stopped',
    outcomeMs: round(now),
    reason: null,
    order_id: null,
    requests: 0,
  }
}

/** Sets the user's outcome; returns true, for `return end(...)` where a journey step settles. */
function end(
  ctx: JourneyContext,
  user: LoadUser,
  outcome: LoadUserOutcome,
  reason: string | null = null,
): true {
  user.outcome = outcome
  user.outcomeMs = round(ctx.now())
  user.reason = reason
  return true
}

function retryPauseMs(o: ResolvedLoadOptions): number {
  if (o.retryDelayMs === null) return o.thinkTimeMs
  const [min, max] = o.retryDelayMs
  return min + Math.random() * (max - min)
}

/** Pauses; false (and the user's outcome set) when the run ends or the user's patience runs out. */
async function wait(ctx: JourneyContext, user: LoadUser, ms: number, lastAnswer: string): Promise<boolean> {
  const left = user.arrivedMs + ctx.options.patienceMs - ctx.now()
  await ctx.pause(Math.max(0, Math.min(ms, left)))
  if (ctx.stopped()) end(ctx, user, 'stopped')
  else if (ms > left) end(ctx, user, 'gave_up', lastAnswer)
  else return true
  return false
}

const orderIdOf = (a: Answer) => (typeof a.body?.order_id === 'string' ? a.body.order_id : null)
/** The order an ALREADY_PURCHASED names (`error.order_id`), the user's own; null if none. */
function ownOrderOf(a: Answer): string | null {
  const error = a.body?.error as Record<string, unknown> | undefined
  return typeof error?.order_id === 'string' ? error.order_id : null
}

/**
 * A checkout answer that ends the journey sets the outcome and returns true; a refusal to retry
 * (429, 503, SALE_NOT_STARTED) returns false.
 */
function settled(ctx: JourneyContext, user: LoadUser, a: Answer): boolean {
  if (a.status === 200 || a.status === 202) {
    user.order_id = orderIdOf(a)
    return end(ctx, user, 'purchased')
  }
  if (a.status === 429 || a.status >= 500 || a.code === 'SALE_NOT_STARTED') return false
  if (a.code === 'SOLD_OUT') return end(ctx, user, 'sold_out', a.code)
  if (a.code === 'INSUFFICIENT_FUNDS') return end(ctx, user, 'insufficient_funds', a.code)
  if (a.code === 'ALREADY_PURCHASED') {
    const own = ownOrderOf(a)
    if (own === null) return end(ctx, user, 'already_purchased', a.code)
    user.order_id = own
    return end(ctx, user, 'purchased', 'already_purchased')
  }
  if (a.code === 'SALE_ENDED') return end(ctx, user, 'closed', 'sale_ended')
  return end(ctx, user, 'error', a.code ?? `HTTP_${a.status}`)
}

/** One checkout click: two requests at once for a double click; the first one's answer counts. */
async function click(
  ctx: JourneyContext,
  user: LoadUser,
  headers: Record<string, string>,
  double: boolean,
): Promise<Answer | undefined> {
  const request = {
    method: 'POST' as const,
    path: '/v1/checkout',
    body: { product_id: ctx.options.productId, user_id: user.user_id },
    headers,
  }
  if (!double) return ctx.call('checkout', user, request)
  const [first] = await Promise.all([
    ctx.call('checkout', user, request),
    ctx.call('checkout', user, request),
  ])
  return first
}

const keyHeader = (key: string | undefined): Record<string, string> =>
  key === undefined ? {} : { 'idempotency-key': key }
const describe = (a: Answer | undefined) => (a === undefined ? 'no answer' : (a.code ?? `HTTP_${a.status}`))

/** 'crowd': straight to the checkout, refusals retried as the options say. */
export async function directJourney(ctx: JourneyContext, user: LoadUser): Promise<void> {
  const o = ctx.options
  const headers = keyHeader(o.idempotencyKeys ? randomUUID() : undefined)
  const doubleClick = Math.random() < o.doubleClickRatio
  const retries = Math.random() < o.repeatRatio
  for (let attempt = 0; ; attempt++) {
    const a = await click(ctx, user, headers, doubleClick && attempt === 0)
    if (a && settled(ctx, user, a)) {
      if (o.afterReserved && user.outcome === 'purchased' && isHeld(a)) await afterReserved(ctx, user)
      return
    }
    if (!retries || attempt >= o.maxRetries) {
      end(ctx, user, 'gave_up', describe(a))
      return
    }
    if (!(await wait(ctx, user, retryPauseMs(o), describe(a)))) return
    ctx.retried()
  }
}

/** A checkout answered `reserved` with `pay_by`: an order of a sale paid later. */
const isHeld = (a: Answer) => a.body?.status === 'reserved' && typeof a.body.pay_by === 'string'

/**
 * A sale paid later: the user pays, cancels or leaves the reserved order (`afterReserved`). The
 * outcome stays 'purchased' (the checkout's answer); what happened next is `user.payment`.
 */
async function afterReserved(ctx: JourneyContext, user: LoadUser): Promise<void> {
  const o = ctx.options
  const plan = o.afterReserved!
  const dice = Math.random()
  const op: LoadOp | undefined =
    dice < plan.payRatio ? 'pay' : dice < plan.payRatio + plan.cancelRatio ? 'cancel' : undefined
  const settle = (payment: PaymentOutcome, reason: string | null = null) => {
    user.payment = payment
    user.paymentReason = reason
  }
  if (op === undefined || user.order_id === null) return settle('left')
  const [min, max] = plan.delayMs
  await ctx.pause(min + Math.random() * (max - min))
  const path = `/v1/orders/${encodeURIComponent(user.order_id)}/${op}`
  for (;;) {
    if (ctx.stopped()) return settle('gave_up', 'stopped')
    const a = await ctx.call(op, user, { method: 'POST', path, body: { user_id: user.user_id } })
    if (a?.status === 200) return settle(op === 'pay' ? 'paid' : 'cancelled')
    if (a?.code === 'INSUFFICIENT_FUNDS') return settle('insufficient_funds', a.code)
    if (a?.code === 'ORDER_NOT_PAYABLE') return settle('not_payable', a.code)
    // Not recorded in SQL yet (ORDER_PENDING, Retry-After: 1), busy, or no answer: again.
    if (!(transient(a) || a?.code === 'ORDER_PENDING')) return settle('error', describe(a))
    const left = user.arrivedMs + o.patienceMs - ctx.now()
    if (left <= 0) return settle('gave_up', describe(a))
    await ctx.pause(Math.min(left, retryPauseMs(o)))
    ctx.retried()
  }
}

/** The fields of the room's answer (QueueAnswer) the journey reads. */
interface RoomState {
  ticket: string | null
  status: string
  reason: string | null
  position: number | null
  order_id: string | null
  poll_after_seconds: number | null
}

function roomState(a: Answer): RoomState | undefined {
  const b = a.body
  if (a.status !== 200 || typeof b?.status !== 'string') return undefined
  return {
    ticket: typeof b.ticket === 'string' ? b.ticket : null,
    status: b.status,
    reason: typeof b.reason === 'string' ? b.reason : null,
    position: typeof b.position === 'number' ? b.position : null,
    order_id: typeof b.order_id === 'string' ? b.order_id : null,
    poll_after_seconds: typeof b.poll_after_seconds === 'number' ? b.poll_after_seconds : null,
  }
}

/** A room answer that ends the journey (sold_out, closed) sets the outcome and returns true. */
function roomSettled(ctx: JourneyContext, user: LoadUser, s: RoomState): boolean {
  if (s.status === 'sold_out') return end(ctx, user, 'sold_out', 'sold_out')
  if (s.status !== 'closed') return false
  if (s.reason !== 'purchased') return end(ctx, user, 'closed', s.reason)
  user.order_id = s.order_id
  return end(ctx, user, 'purchased', 'purchased')
}

/**
 * The order key a ticket names (see TicketClaims in @kunci/flash-sale): `v1.<payload>.<mac>`,
 * the payload `product|generation|user|orderKey` in base64url. Read for the lab's figures only; a
 * real client treats the ticket as opaque. Null when the ticket does not have that shape.
 */
export function lineKeyOf(ticket: string): string | null {
  const payload = ticket.split('.')[1]
  if (payload === undefined) return null
  const key = Buffer.from(payload, 'base64url').toString().split('|')[3]
  return key !== undefined && /^\d{1,16}$/.test(key) ? key : null
}

/** 5xx, 429 or no answer: worth another try. Anything else that is not a 200 ends the journey. */
const transient = (a: Answer | undefined) => a === undefined || a.status === 429 || a.status >= 500

/** 'waiting-room': join, poll within the bounds, check out with the ticket once admitted. */
export async function roomJourney(ctx: JourneyContext, user: LoadUser): Promise<void> {
  const o = ctx.options
  const [pollMin, pollMax] = o.pollIntervalMs
  const headers = keyHeader(o.idempotencyKeys ? randomUUID() : undefined)
  const doubleClick = Math.random() < o.doubleClickRatio
  let clicks = 0
  let state: RoomState | undefined
  for (;;) {
    const a = await ctx.call('join', user, {
      method: 'POST',
      path: `/v1/sales/${o.productId}/queue`,
      body: { user_id: user.user_id },
    })
    state = a && roomState(a)
    if (state) break
    if (!transient(a)) {
      end(ctx, user, 'error', describe(a))
      return
    }
    if (!(await wait(ctx, user, retryPauseMs(o), describe(a)))) return
    ctx.retried()
  }
  user.position = state.position
  const ticket = state.ticket
  user.lineKey = ticket === null ? null : lineKeyOf(ticket)
  // No ticket: no place was made (the sale has ended).
  if (ticket === null) {
    if (!roomSettled(ctx, user, state)) end(ctx, user, 'closed', state.reason)
    return
  }
  let last = state.status
  for (;;) {
    if (roomSettled(ctx, user, state)) return
    let pauseMs: number
    if (state.status === 'admitted') {
      user.admittedMs ??= round(ctx.now())
      const a = await click(
        ctx,
        user,
        { ...headers, 'waiting-room-ticket': ticket },
        doubleClick && clicks === 0,
      )
      clicks++
      if (a && a.code !== 'NOT_ADMITTED' && settled(ctx, user, a)) return
      last = describe(a)
      if (a?.code === 'NOT_ADMITTED') {
        // Admitted, then refused: a lapse or a failover took the admission back. Poll again.
        state = { ...state, status: 'waiting' }
        pauseMs = pollMin
      } else {
        // 503 or no answer: the same click again, with the same key.
        if (!(await wait(ctx, user, retryPauseMs(o), last))) return
        ctx.retried()
        continue
      }
    } else {
      const afterMs = (state.poll_after_seconds ?? 0) * 1_000
      pauseMs = Math.min(pollMax, Math.max(pollMin, afterMs))
    }
    if (!(await wait(ctx, user, pauseMs, last))) return
    const p = await ctx.call('poll', user, { method: 'GET', path: `/v1/queue/${encodeURIComponent(ticket)}` })
    const next = p && roomState(p)
    if (next) {
      state = next
      last = next.status
    } else if (!transient(p)) {
      end(ctx, user, 'error', describe(p))
      return
    } else last = describe(p)
  }
}
