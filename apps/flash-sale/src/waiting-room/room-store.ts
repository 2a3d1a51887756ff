import { Script } from 'kunci'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys } from '../redis/keys.js'
import type { ReplicaAcks } from '../redis/replica-acks.js'
import { UnexpectedScriptReplyError } from '../sale/sale-store.js'
import { configureKeys, gateKeys, roomKeys, visitKeys } from './room-keys.js'
import type { ResolvedWaitingRoom } from './room-options.js'

const script = (name: string) => Script.fromFile(new URL(`./scripts/${name}.lua`, import.meta.url))

/** The room's scripts, run through kunci's Script (EVALSHA, EVAL on NOSCRIPT). */
export const ROOM_SCRIPTS = {
  configure: script('configure'),
  visit: script('visit'),
  gate: script('gate'),
}

export type VisitStatus = 'waiting' | 'admitted' | 'sold_out' | 'closed'
export type VisitReason = '' | 'sale_ended' | 'purchased' | 'dropped' | 'admission_expired'

export type VisitReply =
  | { kind: 'off' }
  | { kind: 'unknown_product' }
  | { kind: 'stale' }
  | {
      kind: 'answer'
      status: VisitStatus
      reason: VisitReason
      /** 1 = next in line; undefined unless waiting. */
      position: number | undefined
      etaMs: number | undefined
      /** The caller's order key ('' when the caller has no place, e.g. the sale ended). */
      orderKey: string
      generation: string
      admittedUntilMs: number | undefined
      orderId: string | undefined
      startsAtMs: number
      /** Admissions per second over the last ~10 s. */
      measuredRate: number
      waiting: number
      admitted: number
      admittedNow: number
      droppedNow: number
      expiredNow: number
      /** Time in line (ms) of each user this call admitted. */
      waitsMs: number[]
      /** Whether the replicas confirmed the call's writes (always true without WAIT). */
      replicated: boolean
    }

export type GateReply =
  | { code: 'OFF' | 'NO_TICKET' | 'STALE' | 'OK' | 'EXPIRED' | 'SOLD_OUT' }
  | { code: 'NOT_ADMITTED'; position: number | undefined }

const STATUSES = new Set(['waiting', 'admitted', 'sold_out', 'closed'])
const REASONS = new Set(['', 'sale_ended', 'purchased', 'dropped', 'admission_expired'])
const GATE_CODES = new Set(['OFF', 'NO_TICKET', 'STALE', 'OK', 'EXPIRED', 'SOLD_OUT', 'NOT_ADMITTED'])

const opt = (n: number) => (n < 0 ? undefined : n)

export function toVisitReply(reply: unknown, replicated: boolean): VisitReply {
  if (!Array.isArray(reply)) throw new UnexpectedScriptReplyError('visit', reply)
  if (reply.length === 1) {
    if (reply[0] === 'OFF') return { kind: 'off' }
    if (reply[0] === 'UNKNOWN_PRODUCT') return { kind: 'unknown_product' }
    if (reply[0] === 'STALE') return { kind: 'stale' }
  }
  if (reply.length < 15 || !STATUSES.has(String(reply[0])) || !REASONS.has(String(reply[1]))) {
    throw new UnexpectedScriptReplyError('visit', reply)
  }
  const n = (i: number) => Number(reply[i])
  return {
    kind: 'answer',
    status: reply[0] as VisitStatus,
    reason: reply[1] as VisitReason,
    position: opt(n(2)),
    etaMs: opt(n(3)),
    orderKey: String(reply[4]),
    generation: String(reply[5]),
    admittedUntilMs: n(6) > 0 ? n(6) : undefined,
    orderId: reply[7] === '' ? undefined : String(reply[7]),
    startsAtMs: n(8),
    measuredRate: n(9) / 1_000,
    waiting: n(10),
    admitted: n(11),
    admittedNow: n(12),
    droppedNow: n(13),
    expiredNow: n(14),
    waitsMs: reply.slice(15).map(Number),
    replicated,
  }
}

export function toGateReply(reply: unknown): GateReply {
  if (!Array.isArray(reply) || !GATE_CODES.has(String(reply[0]))) {
    throw new UnexpectedScriptReplyError('gate', reply)
  }
  if (reply[0] === 'NOT_ADMITTED') return { code: 'NOT_ADMITTED', position: opt(Number(reply[1])) }
  return { code: reply[0] as Exclude<GateReply['code'], 'NOT_ADMITTED'> }
}

export interface RoomSetup {
  generation: string
  options: ResolvedWaitingRoom
  secret: string
  commitment: string
}

/**
 * The Redis side of the waiting rooms. Writes (configure, visit) are confirmed on a replica like
 * the checkout's reservations, through the service's one confirmation mechanism
 * (redis/replica-acks.ts: one WAIT round per master at a time, on a connection of its own,
 * answered at once while the master has no replica): an answer that says "admitted" or gives a
 * place is on a replica before the user sees it, unless the round could not show it
 * (`replicated` false, counted by flash_sale_waiting_room_unreplicated_total), so a failover does
 * not take it back. No WAIT ever holds the connection the checkouts share.
 */
export class RoomStore {
  constructor(
    readonly client: RedisClient,
    /** Replica confirmation of the room's writes (durability `replica`); none: not asked. */
    readonly acks: ReplicaAcks | undefined,
  ) {}

  async configure(productId: string, setup: RoomSetup | undefined): Promise<number> {
    const o = setup?.options
    const args = setup
      ? [
          '1',
          setup.generation,
          String(o!.admit_per_second),
          String(o!.max_admitted),
          String(o!.admission_seconds * 1_000),
          String(o!.stock_factor),
          String(o!.drop_after_seconds * 1_000),
          setup.secret,
          setup.commitment,
        ]
      : ['0', '', '', '', '', '', '', '', '']
    const { reply } = await this.#write(
      ROOM_SCRIPTS.configure,
      productId,
      configureKeys(roomKeys(productId)),
      args,
    )
    return Number(reply)
  }

  async visit(
    productId: string,
    input: { mode: 'join' } | { mode: 'poll'; generation: string; orderKey: string },
    userId: string,
  ): Promise<VisitReply> {
    const args =
      input.mode === 'join' ? ['join', userId, '', ''] : ['poll', userId, input.generation, input.orderKey]
    const { reply, replicated } = await this.#write(
      ROOM_SCRIPTS.visit,
      productId,
      visitKeys(roomKeys(productId)),
      args,
    )
    return toVisitReply(reply, replicated)
  }

  /** Read only: no WAIT. */
  async gate(productId: string, userId: string, generation: string): Promise<GateReply> {
    const reply = await ROOM_SCRIPTS.gate.run(this.client, gateKeys(roomKeys(productId)), [
      userId,
      generation,
    ])
    return toGateReply(reply)
  }

  /** The lottery's public commitment and secret, and with `entrants` the draw in rank order. */
  async draw(productId: string, entrants: boolean) {
    const k = roomKeys(productId)
    const [gen, secret, commitment] = await this.client.hmget(k.room, 'gen', 'secret', 'commitment')
    if (gen === null) return undefined
    const list = entrants ? await this.client.zrange(k.draw, 0, -1, 'WITHSCORES') : []
    const ranked: { user_id: string; rank: number }[] = []
    for (let i = 0; i + 1 < list.length; i += 2) ranked.push({ user_id: list[i]!, rank: Number(list[i + 1]) })
    return { generation: gen, secret: secret ?? '', commitment: commitment ?? '', entrants: ranked }
  }

  async #write(
    s: Script,
    productId: string,
    keys: string[],
    args: string[],
  ): Promise<{ reply: unknown; replicated: boolean }> {
    const mark = saleKeys(productId).ackMark
    const servedBy = this.acks?.nodeOf(mark)
    const reply = await s.run(this.client, keys, args)
    // The marker key shares the sale's hash tag, so the round goes to the room's node (the one
    // that ran the script, or the answer is unconfirmed).
    const replicated = this.acks ? servedBy !== undefined && (await this.acks.confirm(mark, servedBy)) : true
    return { reply, replicated }
  }
}
