/**
 * Every Redis key of the service. All keys of one sale share the hash tag `{sale:<id>}`, so the
 * reservation script touches one slot (one node of the Cluster) and runs atomically.
 */
export function saleKeys(productId: string) {
  const tag = `{sale:${productId}}`
  return {
    /**
     * Hash: round, stock_total, price_cents, starts_at_ms, ends_at_ms, per_user_limit, payment
     * ('instant' | 'hold'), hold_seconds, epoch.
     */
    meta: `${tag}:meta`,
    /** Integer: units not yet reserved. */
    stock: `${tag}:stock`,
    /**
     * Hash: user id → "<live units>|<last live order id>|<slots>" for this round, slots being the
     * user's live order ids by unit number, comma-separated, '' where a return freed the number
     * (sale/scripts/reserve.lua takes the lowest free one).
     */
    buyers: `${tag}:buyers`,
    /** Hash: idempotency key → the stored answer. */
    idem: `${tag}:idem`,
    /** Hash: order id → "<status>|<user>|<round>" (reserved, confirmed, failed). */
    status: `${tag}:status`,
    /** Stream of order events, consumed by the workers' group (the outbox). */
    orders: `${tag}:orders`,
    /**
     * Hash: order id → why its unit went back to the sale (return-units.lua): each order gives its
     * unit back once. Dropped with the round (preload.lua).
     */
    returned: `${tag}:returned`,
    /**
     * Hash: restock id → units, the restocks this round's stock holds (restock.lua applies each
     * once). Dropped with the round (preload.lua).
     */
    restocks: `${tag}:restocks`,
    /** Stream of events that kept failing, with the reason. */
    dead: `${tag}:dead`,
    /** String written before a WAIT round on the sale's node (redis/replica-acks.ts); expires. */
    ackMark: `${tag}:ack`,
    /**
     * Sharded pub/sub channel on the sale's slot (SPUBLISH/SSUBSCRIBE): 'sold-out <epoch>' from
     * the reservation that sold the last unit, 'epoch <n>' from anything that can make a unit
     * sellable again (reset, restock, a returned unit).
     */
    events: `${tag}:events`,
    /** The waiting room's settings (waiting-room/room-keys.ts); reserve.lua reads its 'gen'. */
    room: `${tag}:room`,
  }
}

export type SaleKeys = ReturnType<typeof saleKeys>

/** Set of product ids with a sale, so workers know which streams to consume. Not slot-bound. */
export const SALES_REGISTRY_KEY = 'flash-sale:sales'
export const WORKER_GROUP = 'order-workers'
export const RELAY_GROUP = 'amqp-relay'
export const CACHE_PREFIX = 'flash-sale:cache'

/**
 * Hash: orders stream entry id → persisting attempts begun and not ended by `group`'s consumers,
 * i.e. workers that died while persisting it (orders/delivery-attempts.ts); the entry's field is
 * dropped when it is settled or dead-lettered. One per group: the worker's and the AMQP relay's
 * groups read the same stream.
 */
export function attemptsKey(productId: string, group: string): string {
  return `{sale:${productId}}:attempts:${group}`
}
