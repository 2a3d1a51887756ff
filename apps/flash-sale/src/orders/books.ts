import { Script } from 'kunci'
import type { RedisClient } from '../redis/connect.js'
import { saleKeys, WORKER_GROUP } from '../redis/keys.js'
import type { UnitBooksReader } from '../sql/readers.js'

const BACKLOG = Script.fromFile(new URL('./scripts/backlog.lua', import.meta.url))

/** At most this many unsettled order events are read per sale; past it the unit check is skipped. */
const MAX_UNSETTLED = 100_000

/** One sale's units as Redis holds them, read atomically (backlog.lua). */
export interface RedisBooks {
  /** Units left; undefined when Redis has no stock for the sale (redlock, or not preloaded). */
  remaining: number | undefined
  deadLettered: number
  /** Order ids of the events the group has not settled: pending in a consumer, or not delivered. */
  unsettled: string[]
  /** More than MAX_UNSETTLED: the list is incomplete and the unit check cannot be made. */
  truncated: boolean
  /** XINFO's lag, for the gauge only: Redis 7.0 can leave it stale after a failover. */
  lag: number | undefined
}

export async function readRedisBooks(
  redis: RedisClient,
  productId: string,
  group = WORKER_GROUP,
): Promise<RedisBooks> {
  const k = saleKeys(productId)
  const raw = (await BACKLOG.run(redis, [k.stock, k.orders, k.dead], [group, MAX_UNSETTLED])) as unknown[]
  const [remaining, dead, truncated, lag] = raw
  return {
    remaining: remaining === null || remaining === undefined ? undefined : Number(remaining),
    deadLettered: Number(dead),
    truncated: Number(truncated) === 1,
    lag: Number(lag) < 0 ? undefined : Number(lag),
    unsettled: raw.slice(4).map(String),
  }
}

/** The unit equation of one sale, each term counted from what is there. */
export interface UnitBooks {
  /** The sale's current round in SQL. */
  round: number
  stockTotal: number
  /** sales.sold: units held by orders in SQL. */
  sold: number
  remaining: number
  /** Returns SQL gave up that Redis's returned hash does not hold yet. */
  returnsNotInRedis: number
  /** Units of restocks SQL recorded that Redis's restocks hash does not hold yet (sale/restocks.ts). */
  restocksNotInRedis: number
  deadLettered: number
  /** Unsettled order events whose order SQL does not hold yet: reserved in Redis, on their way. */
  inQueue: number
  /** stock − (sold + remaining + returns not in Redis + dead letters + in queue); 0 when sound. */
  drift: number
}

/**
 * The units of a sale's current round: stock_total = sold + remaining + returns pending (not yet
 * in Redis) + restocks pending (not yet in Redis) + dead letters + order events not yet in SQL. Redis is read first, atomically; SQL
 * after, so an event settled in between is found in SQL and not counted twice. A reservation made
 * in between and persisted before SQL is read shows as +1 for that one reading (the gauge only
 * reports a value two readings agree on). Undefined when Redis holds no stock for the sale or the
 * unsettled events are too many to list.
 */
export async function unitBooks(
  redis: RedisClient,
  orders: UnitBooksReader,
  productId: string,
  group = WORKER_GROUP,
): Promise<UnitBooks | undefined> {
  const r = await readRedisBooks(redis, productId, group)
  if (r.remaining === undefined || r.truncated) return undefined
  const sale = await orders.saleCounts(productId)
  if (!sale) return undefined
  const persisted = await orders.countExisting(r.unsettled)
  let returnsNotInRedis = sale.returns_pending
  if (sale.returns_pending > 0) {
    const pending = await orders.pendingReturnIds(productId, sale.round)
    if (pending.length > 0) {
      const held = await redis.hmget(saleKeys(productId).returned, ...pending)
      returnsNotInRedis = held.filter((v) => v === null).length
    }
  }
  let restocksNotInRedis = 0
  const restocks = await orders.pendingRestocks(productId, sale.round)
  if (restocks.length > 0) {
    const held = await redis.hmget(saleKeys(productId).restocks, ...restocks.map((r) => r.restock_id))
    for (const [i, r] of restocks.entries()) if (held[i] === null) restocksNotInRedis += Number(r.units)
  }
  const inQueue = r.unsettled.length - persisted
  const accounted =
    sale.sold + r.remaining + returnsNotInRedis + restocksNotInRedis + r.deadLettered + inQueue
  return {
    round: sale.round,
    stockTotal: sale.stock_total,
    sold: sale.sold,
    remaining: r.remaining,
    returnsNotInRedis,
    restocksNotInRedis,
    deadLettered: r.deadLettered,
    inQueue,
    drift: sale.stock_total - accounted,
  }
}
