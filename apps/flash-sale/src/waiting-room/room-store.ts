import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import type { ChainableCommander } from 'ioredis'
import { isRedirect, type RedisClient, refreshSlots } from '../redis/connect.js'
import { UnexpectedScriptReplyError } from '../sale/sale-store.js'
import { isNoScript } from '../sale/scripts.js'
import { configureKeys, gateKeys, roomKeys, visitKeys } from './room-keys.js'
import type { ResolvedWaitingRoom } from './room-options.js'

/**
 * A script of the room, read once from `./scripts/<name>.lua` and run by SHA with a fall-back to
 * its source: the same contract as sale/scripts.ts's SaleScript, kept beside the room's scripts
 * so the two modules can move independently.
 */
class RoomScript {
  readonly source: string
  readonly sha: string
  constructor(
    readonly name: string,
    readonly keyCount: number,
  ) {
    this.source = readFileSync(new URL(`./scripts/${name}.lua`, import.meta.url), 'utf8')
    this.sha = createHash('sha1').update(this.source).digest('hex')
  }

  async run(client: RedisClient, keys: readonly string[], args: readonly (string | number)[]) {
    try {
      return await client.evalsha(this.sha, this.keyCount, ...keys, ...args)
    } catch (err) {
      if (!isNoScript(err)) throw err
      return await client.eval(this.source, this.keyCount, ...keys, ...args)
    }
  }

  queue(
    pipeline: ChainableCommander,
    keys: readonly string[],
    args: readonly (string | number)[],
    useSource = false,
  ): ChainableCommander {
    return useSource
      ? pipeline.eval(this.source, this.keyCount, ...keys, ...args)
      : pipeline.evalsha(this.sha, this.keyCount, ...keys, ...args)
  }
}

export const ROOM_SCRIPTS = {
  configure: new RoomScript('configure', 6),
  visit: new RoomScript('visit', 9),
  gate: new RoomScript('gate', 6),
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

interface Pending {
  script: RoomScript
  keys: string[]
  args: string[]
  resolve: (r: { reply: unknown; replicated: boolean }) => void
  reject: (err: unknown) => void
  /** EVAL instead of EVALSHA (after a NOSCRIPT from a promoted replica). */
  useSource: boolean
  /** MOVED/ASK/TRYAGAIN/CLUSTERDOWN answers so far. */
  redirects: number
}

/** One sale's writes: at most one pipeline (and one WAIT) in flight, the next batch gathering. */
interface Lane {
  queue: Pending[]
  busy: boolean
}

/** Scripts per pipeline: Redis runs a pipeline's scripts back to back, so keep each one short. */
const MAX_BATCH = 128
const MAX_REDIRECTS = 5

export interface RoomSetup {
  generation: string
  options: ResolvedWaitingRoom
  secret: string
  commitment: string
}

/**
 * The Redis side of the waiting rooms. Writes (configure, visit) are followed by `WAIT
 * <replicas>` like the checkout's reservations: an answer that says "admitted" or gives a place
 * is on a replica before the user sees it (unless WAIT timed out, which `replicated` reports),
 * so a failover does not take it back. Per sale one pipeline with its WAIT is in flight at a
 * time, and everything that arrives meanwhile goes out together in the next one (group commit:
 * thousands of polls a second cost a few WAITs, even while a replica is missing).
 */
export class RoomStore {
  readonly #lanes = new Map<string, Lane>()

  constructor(
    readonly client: RedisClient,
    readonly options: { replicas: number; waitTimeoutMs: number },
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

  #write(script: RoomScript, productId: string, keys: string[], args: string[]) {
    if (this.options.replicas === 0) {
      return script.run(this.client, keys, args).then((reply) => ({ reply, replicated: true }))
    }
    return new Promise<{ reply: unknown; replicated: boolean }>((resolve, reject) => {
      this.#enqueue(productId, { script, keys, args, resolve, reject, useSource: false, redirects: 0 })
    })
  }

  /**
   * Group commit done right: a WAIT holds the connection until the replica answers or the
   * timeout passes (a failed-over master has no replica for a while: every WAIT then lasts
   * waitTimeoutMs). So per sale one pipeline is in flight at a time; what arrives meanwhile
   * waits for it and goes out together in the next one, instead of one WAIT queueing behind
   * another on the connection.
   */
  #enqueue(productId: string, item: Pending): void {
    let lane = this.#lanes.get(productId)
    if (lane === undefined) {
      lane = { queue: [], busy: false }
      this.#lanes.set(productId, lane)
    }
    lane.queue.push(item)
    if (lane.busy) return
    lane.busy = true
    const owned = lane
    // The rest of this event-loop turn joins the first batch.
    setImmediate(() => void this.#drain(productId, owned))
  }

  async #drain(productId: string, lane: Lane): Promise<void> {
    while (lane.queue.length > 0) await this.#flush(lane, lane.queue.splice(0, MAX_BATCH))
    lane.busy = false
    this.#lanes.delete(productId)
  }

  /** Never throws: each item is resolved, rejected, or queued again on the lane. */
  async #flush(lane: Lane, batch: Pending[]): Promise<void> {
    const { replicas, waitTimeoutMs } = this.options
    let results: [Error | null, unknown][] | null
    try {
      const pipeline = this.client.pipeline()
      for (const item of batch) item.script.queue(pipeline, item.keys, item.args, item.useSource)
      results = await pipeline.wait(replicas, waitTimeoutMs).exec()
    } catch (err) {
      for (const item of batch) item.reject(err)
      return
    }
    const [waitErr, acked] = results?.[batch.length] ?? [new Error('no WAIT reply'), 0]
    const replicated = !waitErr && Number(acked) >= replicas
    let redirected = false
    for (const [i, item] of batch.entries()) {
      const [err, reply] = results?.[i] ?? [new Error('empty pipeline result'), null]
      if (err === null) {
        item.resolve({ reply, replicated })
      } else if (isNoScript(err) && !item.useSource) {
        // The script did not run: a promoted replica has an empty script cache.
        item.useSource = true
        lane.queue.push(item)
      } else if (isRedirect(err) && item.redirects < MAX_REDIRECTS) {
        // Not run either; ioredis follows MOVED for single commands, not in a pipeline with WAIT.
        item.redirects++
        redirected = true
        lane.queue.push(item)
      } else {
        item.reject(err)
      }
    }
    if (redirected) {
      await refreshSlots(this.client).catch(() => {})
      await sleep(20)
    }
  }
}
