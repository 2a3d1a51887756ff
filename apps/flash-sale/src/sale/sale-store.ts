import { setTimeout as sleep } from 'node:timers/promises'
import { isReserveCode, type ReserveCode } from '../domain/refusals.js'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys } from '../redis/keys.js'
import { isRedirect, isRedisOutage } from '../redis/redis-errors.js'
import { isDurable, type ReplicaAcks } from '../redis/replica-acks.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import {
  isRecordedRefusal,
  type RefuseInput,
  type RefuseReply,
  ReservationScriptError,
  type ReserveInput,
  type ReserveReply,
  UnexpectedScriptReplyError,
} from './sale-replies.js'
import { readingBuyers, saleScript } from './sale-scripts.js'
import { SaleStock } from './sale-stock.js'
import type { SlotWatch } from './slot-watch.js'
import { type Pending, TurnBatcher } from './turn-batcher.js'

const RESERVE = readingBuyers('reserve')
const REFUSE = saleScript('refuse')

export type {
  RefuseInput,
  RefuseReply,
  ReserveInput,
  ReserveReply,
  SaleDefinition,
  SaleState,
  UnitReturn,
  UnitReturnReply,
} from './sale-replies.js'
export { isRecordedRefusal, ReservationScriptError, UnexpectedScriptReplyError } from './sale-replies.js'

/**
 * Checkouts per script call: a script holds the Redis thread while it runs (a checkout costs it
 * ~10 µs), so a batch is cut into calls of at most this many.
 */
const MAX_PER_CALL = 100
/** A batch cut into script calls of at most MAX_PER_CALL checkouts. */
function cut<T>(list: T[]): T[][] {
  const calls: T[][] = []
  for (let from = 0; from < list.length; from += MAX_PER_CALL)
    calls.push(list.slice(from, from + MAX_PER_CALL))
  return calls
}

/** reserve.lua's reply starts with epoch, remaining, room generation, server time, hold_seconds. */
const HEADER = 5

export interface SaleStoreOptions {
  /**
   * Replica confirmation of reservations (durability `replica`); without it a reservation is
   * answered as soon as the master ran the script.
   */
  acks?: ReplicaAcks
  /** Told whether each reservation round reached the sale's slot (sale/slot-watch.ts). */
  watch?: Pick<SlotWatch, 'record'>
  /**
   * A reservation not answered within this (script and confirmation round) fails with
   * TimeoutError, and the slot counts as unreachable. @defaultValue 2000
   */
  deadlineMs?: number
  /** Told the size of every batch sent (flash_sale_reserve_batch_size). */
  onBatch?: (kind: 'reserve' | 'refuse', size: number) => void
  /**
   * Group commit: while a sale's last reservation (or refusal) call is out and younger than
   * this (ms), the checkouts that arrive wait for its answer and go together in the next call
   * (sale/turn-batcher.ts). 0 sends one call per event-loop turn. @defaultValue 20
   */
  holdWhileInFlightMs?: number
}

/**
 * The Redis side of a sale: the checkout's atomic reservations and recorded refusals, batched per
 * sale and event-loop turn (group commit), on top of the stock's other changes (SaleStock).
 */
export class SaleStore extends SaleStock {
  readonly #acks: ReplicaAcks | undefined
  readonly #watch: Pick<SlotWatch, 'record'> | undefined
  readonly #deadlineMs: number
  readonly #onBatch: SaleStoreOptions['onBatch']
  readonly #reserves: TurnBatcher<ReserveInput, ReserveReply>
  readonly #refusals: TurnBatcher<RefuseInput, RefuseReply>

  constructor(client: RedisClient, options: SaleStoreOptions = {}) {
    super(client, options)
    this.#acks = options.acks
    this.#watch = options.watch
    this.#deadlineMs = options.deadlineMs ?? 2_000
    this.#onBatch = options.onBatch
    const batching = { holdWhileInFlightMs: options.holdWhileInFlightMs }
    this.#reserves = new TurnBatcher(
      (p, b, release) => this.#bounded(p, b, this.#reserve(p, b, release)),
      batching,
    )
    this.#refusals = new TurnBatcher(
      (p, b, release) => this.#bounded(p, b, this.#refuse(p, b, release)),
      batching,
    )
  }

  /**
   * One checkout's reservation. The reservations of one sale that arrive in the same event-loop
   * turn go to Redis as one reserve.lua call carrying all of them (group commit), each answered as
   * if alone. With replica acknowledgements, only the answers that reserved a unit (fresh or
   * replayed: a repeat must not look more durable than the original) wait for one shared
   * confirmation round; refusals are answered at once, since no WAIT could change them.
   */
  reserve(input: ReserveInput): Promise<ReserveReply> {
    return this.#reserves.add(input.productId, input)
  }

  /**
   * Waits at most `withinMs` for the sale's master to be shown durable (a replica holds what it
   * answered, or it is alone): true once it is, false if not within the time. Without replica
   * acknowledgements: true. For an answer that names an order (ALREADY_PURCHASED) or a final
   * refusal kept under a key, while a replica resyncs after rejoining (about a second) or is only
   * slow to acknowledge. Its rounds go out even while the node is marked short of replicas.
   */
  async waitDurable(productId: string, withinMs: number, servedBy: string | undefined): Promise<boolean> {
    if (!this.#acks) return true
    if (servedBy === undefined) return false
    const deadline = performance.now() + withinMs
    for (;;) {
      // A round may take WAIT's timeout + its slack: never past the caller's time.
      const left = deadline - performance.now()
      if (left <= 0) return false
      const outcome = await withTimeout(
        this.#acks.confirmOutcome(saleKeys(productId).ackMark, servedBy, true),
        left,
      ).catch(() => 'timeout' as const)
      if (isDurable(outcome)) return true
      if (performance.now() + 100 > deadline) return false
      await sleep(100)
    }
  }

  /** The deadline of one reservation or refusal call (ms): a checkout's whole budget. */
  get deadlineMs(): number {
    return this.#deadlineMs
  }

  /** A snapshot's refusal for a checkout with an Idempotency-Key, recorded first (refuse.lua). */
  refuse(input: RefuseInput): Promise<RefuseReply> {
    return this.#refusals.add(input.productId, input)
  }

  /**
   * Bounded: while a slot fails over, ioredis retries a call for seconds. The users get 503 (and
   * retry with the same Idempotency-Key) instead of a hanging request, and the watch learns at
   * once that the slot does not answer. A late reply settles nothing.
   */
  async #bounded<I, R>(productId: string, batch: Pending<I, R>[], work: Promise<boolean>): Promise<void> {
    let answered = false
    const timer = setTimeout(() => {
      if (!answered) this.#watch?.record(productId, false)
      for (const item of batch) item.reject(new TimeoutError(this.#deadlineMs))
    }, this.#deadlineMs)
    try {
      answered = await work
    } catch (err) {
      if (isRedisOutage(err) && !isRedirect(err)) this.#watch?.record(productId, false)
      for (const item of batch) item.reject(err)
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * Sends a batch's script calls at once (pipelined, in order, on the sale's connection). Each
   * call's checkouts are answered from its own reply; a call that failed rejects its own, and
   * its error is thrown once the others are answered (the slot watch learns of the outage).
   */
  async #runCalls<I, R>(
    chunks: Pending<I, R>[][],
    run: (chunk: Pending<I, R>[]) => Promise<unknown>,
    handle: (chunk: Pending<I, R>[], raw: unknown) => void,
    release: () => void,
  ): Promise<void> {
    const replies = await Promise.allSettled(chunks.map(run))
    // The scripts have answered: the sale's next batch may go while this one is confirmed.
    release()
    let failure: { err: unknown } | undefined
    for (const [j, chunk] of chunks.entries()) {
      const r = replies[j]!
      try {
        if (r.status === 'rejected') throw r.reason
        handle(chunk, r.value)
      } catch (err) {
        for (const item of chunk) item.reject(err)
        failure ??= { err }
      }
    }
    if (failure) throw failure.err
  }

  /**
   * Answers that name an order (a reservation, a purchase), once one confirmation round on the
   * node that served them has shown how durable they are (replica-acks.ts).
   */
  async #confirm<I, R extends { replicated: boolean }>(
    ackMark: string,
    servedBy: string | undefined,
    answers: [Pending<I, R>, R][],
  ): Promise<void> {
    if (answers.length === 0) return
    const outcome = await this.#acks!.confirmOutcome(ackMark, servedBy)
    const replicated = outcome === 'acked'
    const durable = isDurable(outcome)
    for (const [item, reply] of answers) item.resolve({ ...reply, replicated, durable, servedBy })
  }

  /** Resolves true once Redis answered (the batch's promises are settled). */
  async #reserve(
    productId: string,
    batch: Pending<ReserveInput, ReserveReply>[],
    release: () => void,
  ): Promise<boolean> {
    const k = saleKeys(productId)
    const keys = [k.meta, k.stock, k.buyers, k.idem, k.status, k.orders, k.room]
    const reserved: [Pending<ReserveInput, ReserveReply>, ReserveReply][] = []
    // The node the scripts go to: only a round on that same node confirms them.
    const servedBy = this.#acks?.nodeOf(k.ackMark)
    const run = (chunk: Pending<ReserveInput, ReserveReply>[]) => {
      const args: string[] = [k.events]
      for (const { input } of chunk)
        args.push(input.userId, input.orderId, input.idempotencyKey ?? '', input.roomGen)
      this.#onBatch?.('reserve', chunk.length)
      return RESERVE.run(this.client, keys, args)
    }
    const handle = (chunk: Pending<ReserveInput, ReserveReply>[], raw: unknown) => {
      if (!Array.isArray(raw) || raw.length !== HEADER + chunk.length * 3)
        throw new UnexpectedScriptReplyError('reserve', raw)
      const epoch = Number(raw[0])
      // Epoch 0: no such sale. Only sales that exist are watched (made-up ids must not grow it).
      if (epoch > 0) this.#watch?.record(productId, true)
      const remaining = Number(raw[1])
      const roomGen = String(raw[2])
      const holdSeconds = Number(raw[4])
      const payByMs = holdSeconds > 0 ? Number(raw[3]) + holdSeconds * 1_000 : undefined
      for (const [i, item] of chunk.entries()) {
        const code = raw[HEADER + i * 3]
        const detail = String(raw[HEADER + 1 + i * 3])
        if (code === 'ERROR') {
          item.reject(new ReservationScriptError(productId, detail))
          continue
        }
        if (code !== 'ROOM_CHECK' && code !== 'SALE_RESETTING' && !isReserveCode(code)) {
          item.reject(new UnexpectedScriptReplyError('reserve', raw))
          continue
        }
        const reply: ReserveReply = {
          code,
          orderId: detail,
          remaining,
          epoch,
          roomGen,
          replayed: Number(raw[HEADER + 2 + i * 3]) === 1,
          replicated: false,
        }
        if (payByMs !== undefined && code === 'RESERVED' && !reply.replayed) reply.payByMs = payByMs
        if (holdSeconds > 0) reply.hold = true
        // ALREADY_PURCHASED names the user's order from the buyer record, and a keyed refusal is
        // kept under the key as final: shown durable first too.
        const confirm =
          code === 'RESERVED' ||
          code === 'ALREADY_PURCHASED' ||
          isRecordedRefusal(code, item.input.idempotencyKey)
        if (confirm && this.#acks) reserved.push([item, reply])
        else item.resolve(reply)
      }
    }
    try {
      await this.#runCalls(cut(batch), run, handle, release)
    } finally {
      // What a call that answered reserved is confirmed even if another call failed.
      await this.#confirm(k.ackMark, servedBy, reserved)
    }
    return true
  }

  async #refuse(
    productId: string,
    batch: Pending<RefuseInput, RefuseReply>[],
    release: () => void,
  ): Promise<boolean> {
    const k = saleKeys(productId)
    const servedBy = this.#acks?.nodeOf(k.ackMark)
    const reserved: [Pending<RefuseInput, RefuseReply>, RefuseReply & { code: ReserveCode }][] = []
    // A call carries one epoch (a batch nearly always has one): grouped, and cut into calls.
    const byEpoch = new Map<number, Pending<RefuseInput, RefuseReply>[]>()
    for (const item of batch) {
      const list = byEpoch.get(item.input.epoch) ?? []
      list.push(item)
      byEpoch.set(item.input.epoch, list)
    }
    const calls = [...byEpoch.values()].flatMap(cut)
    const run = (chunk: Pending<RefuseInput, RefuseReply>[]) => {
      const args: string[] = [String(chunk[0]!.input.epoch)]
      for (const { input } of chunk) args.push(input.userId, input.idempotencyKey, input.code, input.orderId)
      this.#onBatch?.('refuse', chunk.length)
      return REFUSE.run(this.client, [k.meta, k.stock, k.idem], args)
    }
    const handle = (chunk: Pending<RefuseInput, RefuseReply>[], raw: unknown) => {
      this.#watch?.record(productId, true)
      if (Array.isArray(raw) && raw.length === 1 && raw[0] === 'STALE') {
        for (const item of chunk) item.resolve({ code: 'STALE' })
        return
      }
      if (!Array.isArray(raw) || raw.length !== chunk.length * 3)
        throw new UnexpectedScriptReplyError('refuse', raw)
      for (const [i, item] of chunk.entries()) {
        const code = raw[i * 3]
        if (!isReserveCode(code)) {
          item.reject(new UnexpectedScriptReplyError('refuse', raw))
          continue
        }
        const reply = {
          code,
          orderId: String(raw[i * 3 + 1]),
          replayed: Number(raw[i * 3 + 2]) === 1,
          replicated: false,
        }
        // The key's recorded answer names an order, or is a final refusal: shown durable first,
        // as in #reserve.
        if (
          (code === 'RESERVED' ||
            code === 'ALREADY_PURCHASED' ||
            isRecordedRefusal(code, item.input.idempotencyKey)) &&
          this.#acks
        )
          reserved.push([item, reply])
        else item.resolve(reply)
      }
    }
    try {
      await this.#runCalls(calls, run, handle, release)
    } finally {
      await this.#confirm(k.ackMark, servedBy, reserved)
    }
    return true
  }
}
