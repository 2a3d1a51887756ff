import { setTimeout as sleep } from 'node:timers/promises'
import { isRedirect, type RedisClient, refreshSlots } from '../redis/connect.js'
import { SALES_REGISTRY_KEY, saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { isNoScript, SCRIPTS } from './scripts.js'

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

export type ReserveCode =
  | 'RESERVED'
  | 'SOLD_OUT'
  | 'ALREADY_PURCHASED'
  | 'SALE_NOT_STARTED'
  | 'SALE_ENDED'
  | 'UNKNOWN_PRODUCT'
  | 'IDEMPOTENCY_KEY_REUSED'

export interface ReserveReply {
  code: ReserveCode
  orderId: string
  remaining: number
  replayed: boolean
  /** With `replicas > 0`: whether WAIT confirmed that many replicas hold the write. */
  replicated: boolean
}

export interface ReserveInput {
  productId: string
  userId: string
  orderId: string
  idempotencyKey: string | undefined
}

interface PendingReserve {
  keys: string[]
  args: string[]
  resolve: (reply: ReserveReply) => void
  reject: (err: unknown) => void
}

const CODES = new Set<string>([
  'RESERVED',
  'SOLD_OUT',
  'ALREADY_PURCHASED',
  'SALE_NOT_STARTED',
  'SALE_ENDED',
  'UNKNOWN_PRODUCT',
  'IDEMPOTENCY_KEY_REUSED',
])

export class UnexpectedScriptReplyError extends Error {
  readonly code = 'E_UNEXPECTED_REPLY'
  constructor(script: string, reply: unknown) {
    super(`${script}.lua answered ${JSON.stringify(reply)}; this is a bug in the service`)
    this.name = 'UnexpectedScriptReplyError'
  }
}

function toReserveReply(reply: unknown, replicated: boolean): ReserveReply {
  if (!Array.isArray(reply) || reply.length !== 4 || !CODES.has(String(reply[0]))) {
    throw new UnexpectedScriptReplyError('reserve', reply)
  }
  return {
    code: reply[0] as ReserveCode,
    orderId: String(reply[1]),
    remaining: Number(reply[2]),
    replayed: Number(reply[3]) === 1,
    replicated,
  }
}

/** The Redis side of a sale: preload, the atomic reservation, order statuses. */
export class SaleStore {
  constructor(readonly client: RedisClient) {}

  async preload(sale: SaleDefinition): Promise<void> {
    const k = saleKeys(sale.productId)
    await SCRIPTS.preload.run(
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
  }

  /**
   * One script call per checkout; with `replicas > 0`, a group commit: the reservations of one
   * sale that arrive in the same event-loop turn go out as one pipeline, script after script, and
   * one WAIT behind them (WAIT has no key, so it is routed with the scripts' slot, to the very node
   * that ran them, and it covers every write before it on that connection). One write and one WAIT
   * per turn instead of per checkout. A replayed answer is waited for too: a repeat must not look
   * more durable than the original.
   */
  reserve(input: ReserveInput, replicas: number, waitTimeoutMs: number): Promise<ReserveReply> {
    const k = saleKeys(input.productId)
    const keys = [k.meta, k.stock, k.buyers, k.idem, k.status, k.orders]
    const args = [input.userId, input.orderId, input.idempotencyKey ?? '']
    if (replicas === 0)
      return SCRIPTS.reserve.run(this.client, keys, args).then((r) => toReserveReply(r, false))
    return new Promise((resolve, reject) => {
      const batchKey = `${input.productId}|${replicas}|${waitTimeoutMs}`
      let batch = this.#batches.get(batchKey)
      if (batch === undefined) {
        batch = []
        this.#batches.set(batchKey, batch)
        setImmediate(() => {
          this.#batches.delete(batchKey)
          void this.#flush(batch!, replicas, waitTimeoutMs)
        })
      }
      batch.push({ keys, args, resolve, reject })
    })
  }

  readonly #batches = new Map<string, PendingReserve[]>()

  async #flush(batch: PendingReserve[], replicas: number, waitTimeoutMs: number): Promise<void> {
    let results: [Error | null, unknown][] | null
    try {
      const pipeline = this.client.pipeline()
      for (const item of batch) SCRIPTS.reserve.queue(pipeline, item.keys, item.args)
      results = await pipeline.wait(replicas, waitTimeoutMs).exec()
    } catch (err) {
      for (const item of batch) item.reject(err)
      return
    }
    const [waitErr, acked] = results?.[batch.length] ?? [new Error('no WAIT reply'), 0]
    const replicated = !waitErr && Number(acked) >= replicas
    for (const [i, item] of batch.entries()) {
      const [scriptErr, reply] = results?.[i] ?? [new Error('empty pipeline result'), null]
      if (scriptErr === null) {
        try {
          item.resolve(toReserveReply(reply, replicated))
        } catch (err) {
          item.reject(err)
        }
      } else if (isNoScript(scriptErr) || isRedirect(scriptErr)) {
        // The script did not run (a promoted replica without the script, or the slot moved):
        // this checkout goes again on its own, which is safe.
        this.#reserveAlone(item, replicas, waitTimeoutMs).then(item.resolve, item.reject)
      } else {
        item.reject(scriptErr)
      }
    }
  }

  async #reserveAlone(item: PendingReserve, replicas: number, waitTimeoutMs: number): Promise<ReserveReply> {
    let useSource = false
    for (let attempt = 1; ; attempt++) {
      const pipeline = SCRIPTS.reserve.queue(this.client.pipeline(), item.keys, item.args, useSource)
      const results = await pipeline.wait(replicas, waitTimeoutMs).exec()
      const [scriptErr, reply] = results?.[0] ?? [new Error('empty pipeline result'), null]
      if (scriptErr) {
        if (!useSource && isNoScript(scriptErr)) {
          useSource = true
          continue
        }
        // ioredis follows MOVED for single commands, not in pipelines that also hold a WAIT.
        if (attempt < 5 && isRedirect(scriptErr)) {
          await refreshSlots(this.client)
          await sleep(20 * attempt)
          continue
        }
        throw scriptErr
      }
      const [waitErr, acked] = results?.[1] ?? [null, 0]
      return toReserveReply(reply, !waitErr && Number(acked) >= replicas)
    }
  }

  async remaining(productId: string): Promise<number | undefined> {
    const v = await this.client.get(saleKeys(productId).stock)
    return v === null ? undefined : Number(v)
  }

  async meta(productId: string): Promise<Record<string, string> | undefined> {
    const m = await this.client.hgetall(saleKeys(productId).meta)
    return Object.keys(m).length === 0 ? undefined : m
  }

  /** `reserved|<user>|<round>` → its parts; undefined if Redis does not know the order. */
  async orderStatus(productId: string, orderId: string) {
    const v = await this.client.hget(saleKeys(productId).status, orderId)
    if (v === null) return undefined
    const [status = '', userId = '', round = '0'] = v.split('|')
    return { status, userId, round: Number(round) }
  }

  async saleIds(): Promise<string[]> {
    return (await this.client.smembers(SALES_REGISTRY_KEY)).sort()
  }
}
