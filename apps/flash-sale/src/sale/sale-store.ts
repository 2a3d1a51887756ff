import { setTimeout as sleep } from 'node:timers/promises'
import { isNoScriptError, Script } from 'kunci'
import { isReserveCode, type ReserveCode } from '../domain/refusals.js'
import { ServiceError } from '../errors.js'
import { type RedisClient, refreshSlots } from '../redis/connect.js'
import { SALES_REGISTRY_KEY, saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { isRedirect, isRedisOutage } from '../redis/redis-errors.js'
import type { ReplicaAcks } from '../redis/replica-acks.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import type { StockView } from '../strategies/strategy.js'
import type { SlotWatch } from './slot-watch.js'

/** The sale's scripts, run through kunci's Script (EVALSHA, EVAL on NOSCRIPT). */
const RESERVE = Script.fromFile(new URL('./scripts/reserve.lua', import.meta.url))
const PRELOAD = Script.fromFile(new URL('./scripts/preload.lua', import.meta.url))

/** A sale as the admin defines it (amounts in cents, times in ms since the epoch, 0 = none). */
export interface SaleDefinition {
  productId: string
  round: number
  stockTotal: number
  priceCents: number
  startsAtMs: number
  endsAtMs: number
  perUserLimit: number
}

export interface ReserveReply {
  code: ReserveCode
  orderId: string
  remaining: number
  replayed: boolean
  /** With replica acknowledgements: whether a replica was shown to hold the reservation. */
  replicated: boolean
}

export interface ReserveInput {
  productId: string
  userId: string
  orderId: string
  idempotencyKey: string | undefined
}

interface PendingReserve {
  productId: string
  keys: string[]
  args: string[]
  resolve: (reply: ReserveReply) => void
  reject: (err: unknown) => void
}

export class UnexpectedScriptReplyError extends ServiceError {
  readonly code = 'E_UNEXPECTED_REPLY'
  constructor(script: string, reply: unknown) {
    super(`${script}.lua answered ${JSON.stringify(reply)}; this is a bug in the service`)
  }
}

function toReserveReply(reply: unknown): ReserveReply {
  if (!Array.isArray(reply) || reply.length !== 4 || !isReserveCode(reply[0])) {
    throw new UnexpectedScriptReplyError('reserve', reply)
  }
  return {
    code: reply[0],
    orderId: String(reply[1]),
    remaining: Number(reply[2]),
    replayed: Number(reply[3]) === 1,
    replicated: false,
  }
}

/** Bound on every Redis read outside the checkout, so that no endpoint hangs during a failover. */
const READ_DEADLINE_MS = 2_000

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
}

/** The Redis side of a sale: preload, the atomic reservation, order statuses. */
export class SaleStore {
  readonly #acks: ReplicaAcks | undefined
  readonly #watch: Pick<SlotWatch, 'record'> | undefined
  readonly #deadlineMs: number

  constructor(
    readonly client: RedisClient,
    options: SaleStoreOptions = {},
  ) {
    this.#acks = options.acks
    this.#watch = options.watch
    this.#deadlineMs = options.deadlineMs ?? 2_000
  }

  async preload(sale: SaleDefinition): Promise<void> {
    const k = saleKeys(sale.productId)
    await PRELOAD.run(
      this.client,
      [k.meta, k.stock, k.buyers, k.idem, k.status, k.orders],
      [
        sale.round,
        sale.stockTotal,
        sale.priceCents,
        sale.startsAtMs,
        sale.endsAtMs,
        sale.perUserLimit,
        WORKER_GROUP,
      ],
    )
    await this.client.sadd(SALES_REGISTRY_KEY, sale.productId)
    this.#watch?.record(sale.productId, true)
  }

  /**
   * One script call per checkout, sent as a group commit: the reservations of one sale that arrive
   * in the same event-loop turn go out as one pipeline. With replica acknowledgements, only the
   * answers that reserved a unit (fresh or replayed: a repeat must not look more durable than the
   * original) then wait for one shared confirmation round; refusals are answered at once, since
   * no WAIT could change them. The WAIT never rides in this pipeline (see replica-acks.ts).
   */
  reserve(input: ReserveInput): Promise<ReserveReply> {
    const k = saleKeys(input.productId)
    const keys = [k.meta, k.stock, k.buyers, k.idem, k.status, k.orders]
    const args = [input.userId, input.orderId, input.idempotencyKey ?? '']
    return new Promise((resolve, reject) => {
      let batch = this.#batches.get(input.productId)
      if (batch === undefined) {
        const fresh: PendingReserve[] = []
        batch = fresh
        this.#batches.set(input.productId, fresh)
        setImmediate(() => {
          this.#batches.delete(input.productId)
          void this.#flush(input.productId, fresh)
        })
      }
      batch.push({ productId: input.productId, keys, args, resolve, reject })
    })
  }

  readonly #batches = new Map<string, PendingReserve[]>()

  async #flush(productId: string, batch: PendingReserve[]): Promise<void> {
    // Bounded: while a slot fails over, ioredis retries the pipeline for seconds. The user gets
    // 503 (and retries with the same Idempotency-Key) instead of a hanging request, and the watch
    // learns at once that the slot does not answer. A late reply settles nothing.
    let answered = false
    const timer = setTimeout(() => {
      if (!answered) this.#watch?.record(productId, false)
      for (const item of batch) item.reject(new TimeoutError(this.#deadlineMs))
    }, this.#deadlineMs)
    try {
      await this.#run(productId, batch, () => {
        answered = true
      })
    } finally {
      clearTimeout(timer)
    }
  }

  async #run(productId: string, batch: PendingReserve[], onAnswer: () => void): Promise<void> {
    let results: [Error | null, unknown][] | null
    try {
      const pipeline = this.client.pipeline()
      for (const item of batch) RESERVE.queue(pipeline, item.keys, item.args)
      results = await pipeline.exec()
    } catch (err) {
      if (isRedisOutage(err)) this.#watch?.record(productId, false)
      for (const item of batch) item.reject(err)
      return
    }
    onAnswer()
    // An outage reply (LOADING, MASTERDOWN…) means the slot did not serve us; a redirect is retried.
    const first = results?.[0]?.[0]
    this.#watch?.record(productId, !(first && isRedisOutage(first) && !isRedirect(first)))
    const reserved: [PendingReserve, ReserveReply][] = []
    for (const [i, item] of batch.entries()) {
      const [scriptErr, raw] = results?.[i] ?? [new Error('empty pipeline result'), null]
      if (scriptErr === null) {
        let reply: ReserveReply
        try {
          reply = toReserveReply(raw)
        } catch (err) {
          item.reject(err)
          continue
        }
        if (reply.code === 'RESERVED' && this.#acks) reserved.push([item, reply])
        else item.resolve(reply)
      } else if (isNoScriptError(scriptErr) || isRedirect(scriptErr)) {
        // The script did not run (a promoted replica without the script, or the slot moved):
        // this checkout goes again on its own, which is safe.
        this.#reserveAlone(item).then(item.resolve, item.reject)
      } else {
        item.reject(scriptErr)
      }
    }
    if (reserved.length === 0) return
    const replicated = await this.#acks!.confirm(saleKeys(productId).ackMark)
    for (const [item, reply] of reserved) item.resolve({ ...reply, replicated })
  }

  async #reserveAlone(item: PendingReserve): Promise<ReserveReply> {
    for (let attempt = 1; ; attempt++) {
      try {
        // run() falls back to the source on NOSCRIPT and, as a single command, follows MOVED.
        const reply = toReserveReply(await RESERVE.run(this.client, item.keys, item.args))
        if (reply.code !== 'RESERVED' || !this.#acks) return reply
        return { ...reply, replicated: await this.#acks.confirm(saleKeys(item.productId).ackMark) }
      } catch (err) {
        if (attempt < 5 && isRedirect(err)) {
          await refreshSlots(this.client)
          await sleep(20 * attempt)
          continue
        }
        throw err
      }
    }
  }

  async remaining(productId: string): Promise<number | undefined> {
    const v = await withTimeout(this.client.get(saleKeys(productId).stock), READ_DEADLINE_MS)
    return v === null ? undefined : Number(v)
  }

  /** Units left in Redis and order events dead-lettered, for the admin's view of the sale. */
  async stockView(productId: string): Promise<StockView> {
    const k = saleKeys(productId)
    const [remaining, deadLettered] = await withTimeout(
      Promise.all([this.client.get(k.stock), this.client.xlen(k.dead)]),
      READ_DEADLINE_MS,
    )
    return { remaining: remaining === null ? undefined : Number(remaining), deadLettered }
  }

  async meta(productId: string): Promise<Record<string, string> | undefined> {
    const m = await withTimeout(this.client.hgetall(saleKeys(productId).meta), READ_DEADLINE_MS)
    return Object.keys(m).length === 0 ? undefined : m
  }

  /** `reserved|<user>|<round>` → its parts; undefined if Redis does not know the order. */
  async orderStatus(productId: string, orderId: string) {
    const v = await withTimeout(this.client.hget(saleKeys(productId).status, orderId), READ_DEADLINE_MS)
    if (v === null) return undefined
    const [status = '', userId = '', round = '0'] = v.split('|')
    return { status, userId, round: Number(round) }
  }

  async saleIds(): Promise<string[]> {
    return (await withTimeout(this.client.smembers(SALES_REGISTRY_KEY), READ_DEADLINE_MS)).sort()
  }
}
