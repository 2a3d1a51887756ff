import { randomBytes } from 'node:crypto'
import {
  DomainRefusalError,
  invalidInput,
  type Refusal,
  unavailable as unavailableRefusal,
} from '../domain/refusals.js'
import { initWaitingRoomSeries, type WaitingRoomMetrics } from '../metrics/room-metrics.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import { lotteryCommitment, newLotterySecret } from './lottery.js'
import { roomKeys } from './room-keys.js'
import { parseWaitingRoom, type ResolvedWaitingRoom } from './room-options.js'
import type { RoomStore, VisitReply } from './room-store.js'
import type { TicketSigner } from './ticket.js'

const REDIS_DEADLINE_MS = 2_000

/** The body of POST /v1/sales/:id/queue and GET /v1/queue/:ticket. */
export interface QueueAnswer {
  /** Null only when no place was made (the sale has ended). */
  ticket: string | null
  /** 1 = next to be admitted; null unless waiting (or sold out while waiting). */
  position: number | null
  /** From the measured admission rate; null when unknown (the line is not moving). */
  eta_seconds: number | null
  status: 'waiting' | 'admitted' | 'sold_out' | 'closed'
  /** With `closed`: sale_ended, purchased, dropped, admission_expired. */
  reason: string | null
  product_id: string
  user_id: string
  /** `pending` before the start: places are provisional until the draw at the opening. */
  draw: 'pending' | 'done'
  starts_at: string | null
  /** With `admitted`: the admission lapses then. */
  admitted_until: string | null
  /** With reason `purchased`: the user's last order. */
  order_id: string | null
  /** Users in line now. */
  waiting: number
  /** Admissions per second measured over the last 10 s. */
  admit_rate: number
  /** When to poll again; a place not polled for drop_after_seconds is dropped. */
  poll_after_seconds: number | null
}

export interface WaitingRoomView extends ResolvedWaitingRoom {
  /** SHA-256 of the draw's secret, published now; the secret is published at the start. */
  lottery_commitment: string
  queue_url: string
  page_url: string
}

const queueUrls = (productId: string) => ({
  queue_url: `/v1/sales/${productId}/queue`,
  page_url: `/queue/${productId}`,
})

/** The room's answers other than success are domain refusals; the routes map them to HTTP. */
const refuse = (r: Refusal) => new DomainRefusalError(r)
const invalid = (field: string, rule: string) => refuse(invalidInput(field, rule))
const unavailable = (why: string, retryAfterS?: number, cause?: unknown) =>
  refuse(unavailableRefusal(why, retryAfterS, cause))

/** Redis trouble → 503 with Retry-After; anything else goes on up. */
async function bounded<T>(p: Promise<T>): Promise<T> {
  try {
    return await withTimeout(p, REDIS_DEADLINE_MS)
  } catch (err) {
    if (err instanceof TimeoutError)
      throw unavailable('the sale store (Redis) did not answer in time', 1, err)
    if (isRedisOutage(err)) throw unavailable('the sale store (Redis) is unreachable or failing over', 1, err)
    throw err
  }
}

function pollAfter(a: Extract<VisitReply, { kind: 'answer' }>): number | null {
  if (a.status === 'closed') return null
  if (a.status === 'admitted') return 10
  if (a.status === 'sold_out') return 5
  // No rate measured yet (the sale just opened): soon, so the first admissions are seen quickly.
  if (a.etaMs === undefined) return 2
  // Near the front every 2 s, far back less often; never near drop_after_seconds (≥ 30).
  return Math.min(10, Math.max(2, Math.round(a.etaMs / 20_000)))
}

/**
 * The waiting room in front of a sale's checkout: joins, polls, the checkout's ticket check and
 * the admin setup. The state is in Redis (room-store.ts, the scripts); this class signs and
 * checks tickets, translates the scripts' answers and keeps the metrics. Like the checkout
 * strategies it says no in the domain's terms (a DomainRefusalError carrying a Refusal,
 * with the answer's fields in `details`); the routes turn that into HTTP, so the room knows no statuses.
 */
export class WaitingRoom {
  constructor(
    readonly store: RoomStore,
    /** Undefined without WAITING_ROOM_SECRET: no room can be set up on this service. */
    readonly signer: TicketSigner | undefined,
    readonly metrics: WaitingRoomMetrics,
    /**
     * False with STRATEGY=redlock: its sales cannot have a room (their stock is in SQL), and its
     * checkouts do not go through the Redis Cluster, so they are not made to depend on it here.
     */
    readonly checksTickets = true,
  ) {
    initWaitingRoomSeries(metrics)
  }

  /**
   * PUT /admin/sales/:id with its `waiting_room` field: validates it, then runs `putSale` with
   * the room set up around it. A new room is written before the sale is reset (checkouts of the
   * old sale meanwhile meet a room nobody is admitted to yet: refused, never let through); a room
   * is removed only after the reset succeeded (a failed reset leaves the old sale guarded).
   */
  async putSaleWithRoom<T extends object>(input: {
    productId: string
    body: unknown
    strategy: string
    putSale: () => Promise<T>
  }): Promise<T & { waiting_room: WaitingRoomView | null }> {
    const options = parseWaitingRoom((input.body as Record<string, unknown>).waiting_room)
    if (options && input.strategy === 'redlock') {
      throw invalid('waiting_room', 'needs the lua or naive strategy (the room reads the stock in Redis)')
    }
    if (options && !this.signer) {
      throw invalid('waiting_room', 'this service has no WAITING_ROOM_SECRET (32 or more characters)')
    }
    let view: WaitingRoomView | null = null
    if (options) {
      const { secret, commitment } = newLotterySecret()
      const generation = randomBytes(8).toString('hex')
      await bounded(this.store.configure(input.productId, { generation, options, secret, commitment }))
      view = { ...options, lottery_commitment: commitment, ...queueUrls(input.productId) }
    }
    const sale = await input.putSale()
    if (!options) await bounded(this.store.configure(input.productId, undefined))
    return { ...sale, waiting_room: view }
  }

  async join(productId: string, userId: string): Promise<QueueAnswer> {
    if (!this.signer) throw this.#noSecret()
    const reply = await bounded(this.#visit(productId, { mode: 'join' }, userId))
    return this.#answer('join', productId, userId, reply)
  }

  /** GET /v1/queue/:ticket: any string; a bad ticket is a 403, never a 5xx. */
  async poll(ticket: string): Promise<QueueAnswer> {
    const check = this.signer?.verify(ticket) ?? { ok: false as const, reason: 'signature' as const }
    if (!check.ok) throw this.#invalid(check.reason, 'poll')
    const { productId, userId, generation, orderKey } = check.claims
    const reply = await bounded(this.#visit(productId, { mode: 'poll', generation, orderKey }, userId))
    return this.#answer('poll', productId, userId, reply)
  }

  /**
   * The checkout's ticket check, before any reservation. No room → nothing to check. With a
   * room: no ticket → 429 WAITING_ROOM; waiting → 429 NOT_ADMITTED; forged, of another user or
   * sale, of an earlier room or lapsed → 403 INVALID_TICKET; not admitted and nothing left →
   * 409 SOLD_OUT. Admitted (or done buying) → the reservation decides. Resolves with the
   * generation of the room the checkout was admitted to ('' for no room), which reserve.lua
   * checks against the sale's room.
   */
  async admit(productId: string, userId: string, header: unknown): Promise<string> {
    if (!this.checksTickets) return ''
    let generation = ''
    let problem: string | undefined
    if (header !== undefined) {
      const check = this.signer?.verify(header) ?? { ok: false as const, reason: 'signature' as const }
      if (!check.ok) problem = check.reason
      else if (check.claims.productId !== productId) problem = 'sale'
      else if (check.claims.userId !== userId) problem = 'user'
      else generation = check.claims.generation
    }
    const gate = await bounded(this.store.gate(productId, userId, generation))
    switch (gate.code) {
      case 'OFF':
        return ''
      case 'OK':
        return generation
      case 'NO_TICKET':
        if (problem !== undefined) throw this.#invalid(problem, 'checkout')
        this.metrics.refusals.inc({ code: 'WAITING_ROOM', reason: '' })
        throw refuse({
          code: 'WAITING_ROOM',
          message: `this sale has a waiting room: join it (POST /v1/sales/${productId}/queue) and send its ticket as Waiting-Room-Ticket once admitted`,
          details: queueUrls(productId),
          retryAfterS: 1,
        })
      case 'STALE':
        throw this.#invalid('stale', 'checkout')
      case 'EXPIRED':
        throw this.#invalid('expired', 'checkout')
      case 'SOLD_OUT':
        throw refuse({ code: 'SOLD_OUT', message: `product ${productId} is sold out` })
      case 'NOT_ADMITTED':
        this.metrics.refusals.inc({ code: 'NOT_ADMITTED', reason: '' })
        throw refuse({
          code: 'NOT_ADMITTED',
          message: 'not your turn yet: poll GET /v1/queue/<ticket> until the status is admitted',
          details: { position: gate.position ?? null, ...queueUrls(productId) },
          retryAfterS: 2,
        })
    }
  }

  /** The lottery: commitment always; secret and (with `entrants`) the ranked entrants after the start. */
  async draw(productId: string, entrants: boolean) {
    const d = await bounded(this.store.draw(productId, entrants))
    if (!d)
      throw refuse({
        code: 'NO_WAITING_ROOM',
        message: `the sale of product ${productId} has no waiting room`,
      })
    const started = await bounded(this.store.client.hget(roomKeys(productId).meta, 'starts_at_ms'))
    const startsAtMs = Number(started ?? 0)
    const open = Date.now() >= startsAtMs
    return {
      product_id: productId,
      algorithm:
        'rank = first 12 hex digits of HMAC-SHA1(key = secret as ASCII, message = user_id), ascending; ties by user_id (bytewise); then later joiners by arrival',
      commitment_sha256: d.commitment,
      // Until the start, the secret would let anyone compute ranks: it stays hidden.
      secret: open ? d.secret : null,
      commitment_ok: open ? lotteryCommitment(d.secret) === d.commitment : null,
      starts_at: startsAtMs > 0 ? new Date(startsAtMs).toISOString() : null,
      ...(entrants ? { entrants: open ? d.entrants : null } : {}),
    }
  }

  /**
   * The script's effects are counted when its reply arrives, even if the HTTP answer already
   * gave up on it (503 after the deadline): the admissions it made happened all the same.
   */
  #visit(productId: string, input: Parameters<RoomStore['visit']>[1], userId: string): Promise<VisitReply> {
    const p = this.store.visit(productId, input, userId)
    p.then((reply) => this.#record(productId, reply)).catch(() => {})
    return p
  }

  #record(productId: string, reply: VisitReply): void {
    if (reply.kind !== 'answer') return
    const m = this.metrics
    const product_id = productId
    m.waiting.set({ product_id }, reply.waiting)
    m.admitted.set({ product_id }, reply.admitted)
    m.admitRate.set({ product_id }, reply.measuredRate)
    if (reply.admittedNow > 0) m.admittedTotal.inc({ product_id }, reply.admittedNow)
    for (const w of reply.waitsMs) m.waitSeconds.observe({ product_id }, w / 1_000)
    if (reply.droppedNow > 0) m.dropped.inc({ product_id, reason: 'idle' }, reply.droppedNow)
    if (reply.expiredNow > 0) m.dropped.inc({ product_id, reason: 'admission_expired' }, reply.expiredNow)
    if (!reply.replicated) {
      m.unreplicated.inc({ what: 'answers' })
      if (reply.admittedNow > 0) m.unreplicated.inc({ what: 'admissions' }, reply.admittedNow)
    }
  }

  #noSecret(): DomainRefusalError {
    return unavailable('this instance has no WAITING_ROOM_SECRET; its waiting rooms cannot answer', 5)
  }

  #invalid(reason: string, op: 'poll' | 'checkout'): DomainRefusalError {
    this.metrics.refusals.inc({ code: 'INVALID_TICKET', reason })
    if (op === 'poll') this.metrics.requests.inc({ op, outcome: 'invalid_ticket' })
    const why: Record<string, string> = {
      malformed: 'this is not a waiting-room ticket',
      signature: 'the ticket is forged or damaged',
      sale: 'the ticket is for another sale',
      user: 'the ticket belongs to another user',
      stale: 'the ticket is from before the sale was reset: join again',
      expired: 'the admission has lapsed: join the line again',
    }
    return refuse({ code: 'INVALID_TICKET', message: why[reason] ?? 'invalid ticket', details: { reason } })
  }

  #answer(op: 'join' | 'poll', productId: string, userId: string, reply: VisitReply): QueueAnswer {
    if (reply.kind === 'off') {
      this.metrics.requests.inc({ op, outcome: 'no_waiting_room' })
      throw refuse({
        code: 'NO_WAITING_ROOM',
        message: `the sale of product ${productId} has no waiting room: check out directly`,
      })
    }
    if (reply.kind === 'unknown_product') {
      this.metrics.requests.inc({ op, outcome: 'unknown_product' })
      throw refuse({ code: 'UNKNOWN_PRODUCT', message: `product ${productId} has no sale` })
    }
    if (reply.kind === 'stale') throw this.#invalid('stale', 'poll')
    this.metrics.requests.inc({ op, outcome: reply.status })
    const ticket =
      reply.orderKey === ''
        ? null
        : this.signer!.sign({ productId, generation: reply.generation, userId, orderKey: reply.orderKey })
    return {
      ticket,
      position: reply.position ?? null,
      eta_seconds: reply.etaMs === undefined ? null : Math.max(0, Math.ceil(reply.etaMs / 1_000)),
      status: reply.status,
      reason: reply.reason === '' ? null : reply.reason,
      product_id: productId,
      user_id: userId,
      draw: Date.now() < reply.startsAtMs ? 'pending' : 'done',
      starts_at: reply.startsAtMs > 0 ? new Date(reply.startsAtMs).toISOString() : null,
      admitted_until: reply.admittedUntilMs ? new Date(reply.admittedUntilMs).toISOString() : null,
      order_id: reply.reason === 'purchased' ? (reply.orderId ?? null) : null,
      waiting: reply.waiting,
      admit_rate: Math.round(reply.measuredRate * 100) / 100,
      poll_after_seconds: pollAfter(reply),
    }
  }
}
