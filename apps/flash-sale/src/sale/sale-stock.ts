import { ServiceError } from '../errors.js'
import type { RedisClient } from '../redis/connect.js'
import { SALES_REGISTRY_KEY, saleKeys, WORKER_GROUP } from '../redis/keys.js'
import { isDurable, type ReplicaAcks } from '../redis/replica-acks.js'
import { withTimeout } from '../runtime-timeout.js'
import { READ_DEADLINE_MS, SaleReads } from './sale-reads.js'
import {
  type SaleDefinition,
  type SaleState,
  UnexpectedScriptReplyError,
  type UnitReturn,
  type UnitReturnReply,
} from './sale-replies.js'
import { readingBuyers, saleScript } from './sale-scripts.js'
import type { SlotWatch } from './slot-watch.js'

const CLOSE_ROUND = saleScript('close-round')
const PRELOAD = saleScript('preload')
const RESTOCK = saleScript('restock')
const RETURN_UNITS = readingBuyers('return-units')

export interface SaleStockOptions {
  /** Replica confirmation: a preload is kept only once shown durable (else SaleNotDurableError). */
  acks?: ReplicaAcks
  /** Told that a preloaded sale's slot was reached (sale/slot-watch.ts). */
  watch?: Pick<SlotWatch, 'record'>
}

/**
 * A sale's stock in Redis outside the checkout: created or reset (preload), restocked, units given
 * back (returns), and the state an instance reads to answer from memory. The admin's routes and
 * the worker use these; SaleStore (sale-store.ts) adds the checkout's batched reservations.
 * Each script here runs once however often it is sent (by round, restock id, order id).
 */
export class SaleStock extends SaleReads {
  readonly #acks: ReplicaAcks | undefined
  readonly #watch: Pick<SlotWatch, 'record'> | undefined

  constructor(client: RedisClient, options: SaleStockOptions = {}) {
    super(client)
    this.#acks = options.acks
    this.#watch = options.watch
  }

  /**
   * Closes the sale's round before a reset moves SQL to `nextRound` (close-round.lua): until
   * preload() opens that round, reservations answer SALE_RESETTING (503) instead of selling a
   * round SQL has closed. Shown durable before it returns (else SaleNotDurableError: SQL must not
   * move), so no failover can bring back a master that sells the old round. 'open': the sale is
   * at nextRound already (a repeated reset whose preload ran); 'none': Redis holds no sale.
   */
  async closeRound(productId: string, nextRound: number): Promise<'closed' | 'open' | 'none'> {
    const k = saleKeys(productId)
    const servedBy = this.#acks?.nodeOf(k.ackMark)
    const reply = Number(
      await withTimeout(CLOSE_ROUND.run(this.client, [k.meta], [nextRound, k.events]), READ_DEADLINE_MS),
    )
    if (reply < 0) return 'none'
    if (reply === 0) return 'open'
    if (this.#acks && !isDurable(await this.#acks.confirmOutcome(k.ackMark, servedBy)))
      throw new SaleNotDurableError(productId)
    return 'closed'
  }

  /** Creates or resets a sale (a new round); returns the sale's new epoch. */
  async preload(sale: SaleDefinition): Promise<number> {
    const k = saleKeys(sale.productId)
    const servedBy = this.#acks?.nodeOf(k.ackMark)
    const epoch = await PRELOAD.run(
      this.client,
      [k.meta, k.stock, k.buyers, k.idem, k.status, k.orders, k.returned, k.restocks],
      [
        sale.round,
        sale.stockTotal,
        sale.priceCents,
        sale.startsAtMs,
        sale.endsAtMs,
        sale.perUserLimit,
        WORKER_GROUP,
        k.events,
        sale.payment ?? 'instant',
        sale.holdSeconds ?? 0,
      ],
    )
    // A sale created on a master that a failover is about to depose would vanish with it (its
    // stream and group too): the admin is told to repeat the call instead (issue 20).
    if (this.#acks && !isDurable(await this.#acks.confirmOutcome(k.ackMark, servedBy)))
      throw new SaleNotDurableError(sale.productId)
    await this.client.sadd(SALES_REGISTRY_KEY, sale.productId)
    this.#watch?.record(sale.productId, true)
    return Number(epoch)
  }

  /**
   * Adds restock `restockId`'s `units` to the round's stock, once however often called
   * (restock.lua); undefined if the sale is not in that round in Redis. Bounded in time: the
   * caller leaves the restock pending and it is applied again later.
   */
  async restock(
    productId: string,
    round: number,
    units: number,
    restockId: string,
  ): Promise<{ epoch: number; stock: number; appliedNow: boolean } | undefined> {
    const k = saleKeys(productId)
    const reply = await withTimeout(
      RESTOCK.run(this.client, [k.meta, k.stock, k.restocks], [units, round, k.events, restockId]),
      READ_DEADLINE_MS,
    )
    if (!Array.isArray(reply) || reply.length !== 3) throw new UnexpectedScriptReplyError('restock', reply)
    if (Number(reply[0]) < 0) return undefined
    return { epoch: Number(reply[0]), stock: Number(reply[1]), appliedNow: Number(reply[2]) === 1 }
  }

  /**
   * Gives the units of `orders` (all of one sale's `round`) back to the sale, each at most once
   * however often this is called (return-units.lua). If any came back, the sale's epoch grows and
   * every instance hears of it. The caller decides how durable it must be: the reply says what
   * the master did; with replica acknowledgements, confirm(saleKeys(id).ackMark) before treating
   * the return as done (a return lost in a failover is simply run again: it is idempotent).
   */
  async returnUnits(
    productId: string,
    round: number,
    orders: readonly UnitReturn[],
  ): Promise<UnitReturnReply> {
    const k = saleKeys(productId)
    const args: (string | number)[] = [k.events, round]
    for (const o of orders) args.push(o.orderId, o.userId, o.reason)
    const raw = await withTimeout(
      RETURN_UNITS.run(this.client, [k.meta, k.stock, k.buyers, k.status, k.returned], args),
      READ_DEADLINE_MS,
    )
    if (!Array.isArray(raw) || raw.length !== orders.length + 2)
      throw new UnexpectedScriptReplyError('return-units', raw)
    const codes = raw.slice(2).map(Number)
    return {
      epoch: Number(raw[0]),
      stock: Number(raw[1]),
      outcomes: codes.map((c) => (c === 1 ? 'returned' : c === 0 ? 'before' : 'stale')),
    }
  }

  /**
   * The sale as an instance needs it to answer from memory, read in one pipeline on its slot:
   * meta, stock, the room's generation and the buyers (only if there are at most `maxBuyers`).
   */
  async state(productId: string, maxBuyers: number): Promise<SaleState | undefined> {
    const k = saleKeys(productId)
    const servedBy = this.#acks?.nodeOf(k.ackMark)
    const results = await withTimeout(
      this.client
        .pipeline()
        .hmget(k.meta, 'epoch', 'starts_at_ms', 'ends_at_ms', 'per_user_limit', 'round')
        .get(k.stock)
        .hget(k.room, 'gen')
        .hlen(k.buyers)
        .exec(),
      READ_DEADLINE_MS,
    )
    const [metaR, stockR, roomR, countR] = results ?? []
    for (const r of [metaR, stockR, roomR, countR]) if (r?.[0]) throw r[0]
    const meta = metaR?.[1] as (string | null)[]
    if (!meta?.[4]) return undefined
    const remaining = Number(stockR?.[1] ?? 0)
    let buyers: SaleState['buyers']
    if (Number(countR?.[1] ?? 0) <= maxBuyers) {
      // HSCAN rather than HGETALL: a big hash is read in steps, never in one blocking reply.
      buyers = new Map()
      let cursor = '0'
      do {
        const [next, flat] = await withTimeout(
          this.client.hscan(k.buyers, cursor, 'COUNT', 1_000),
          READ_DEADLINE_MS,
        )
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const [count = '0', last = ''] = flat[i + 1]!.split('|')
          buyers.set(flat[i]!, { count: Number(count), lastOrderId: last })
        }
        cursor = next
      } while (cursor !== '0')
    }
    const durable = this.#acks ? isDurable(await this.#acks.confirmOutcome(k.ackMark, servedBy)) : true
    return {
      durable,
      epoch: Number(meta[0] ?? 0),
      remaining,
      startsAtMs: Number(meta[1] ?? 0),
      endsAtMs: Number(meta[2] ?? 0),
      perUserLimit: Number(meta[3] ?? 1),
      roomGen: String(roomR?.[1] ?? ''),
      buyers,
    }
  }
}

/**
 * A sale's preload ran on a master that could not show a replica holds it (nor that it is alone):
 * a failover may drop it. The PUT answers 503; repeating it starts a new round on whichever master
 * serves the sale by then.
 */
export class SaleNotDurableError extends ServiceError {
  readonly code = 'E_SALE_NOT_DURABLE'
  constructor(readonly productId: string) {
    super(
      `sale ${productId} was loaded on a Redis master that could not show a replica holds it (a partition or a failover under way); repeat the call`,
    )
  }
}
