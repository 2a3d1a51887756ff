import type { RedisClient } from '../redis/connect.js'
import { saleKeys } from '../redis/keys.js'

const CHANNEL = /^\{sale:([A-Za-z0-9_-]{1,64})\}:events$/

/**
 * The sales' notifications, on each sale's own sharded channel (SSUBSCRIBE `{sale:<id>}:events`,
 * Redis 7): the master of the sale's slot delivers them, so a sale's crowd never costs the other
 * shards anything (classic PUBLISH is broadcast to every node of a Cluster). The subscriber is a
 * client of its own; ioredis keeps one sharded subscriber per master and moves the subscriptions
 * when slots move. A notification lost in a failover is caught by the snapshots' per-second check.
 */
export class SaleEvents {
  readonly #subscriber: RedisClient
  readonly #watched = new Set<string>()
  readonly #onMessage: (productId: string, message: string) => void

  constructor(subscriber: RedisClient, onMessage: (productId: string, message: string) => void) {
    this.#subscriber = subscriber
    this.#onMessage = onMessage
    // Connection errors are ioredis' to retry; a lost notification is caught by the snapshots' check.
    subscriber.on('error', () => {})
    subscriber.on('smessage', (channel: string, message: string) => {
      const id = CHANNEL.exec(channel)?.[1]
      if (id !== undefined) this.#onMessage(id, message)
    })
  }

  /** Subscribes to the sale's channel once (a failure is retried the next time it is asked). */
  watch(productId: string): void {
    if (this.#watched.has(productId)) return
    this.#watched.add(productId)
    this.#subscriber.ssubscribe(saleKeys(productId).events).catch(() => this.#watched.delete(productId))
  }

  close(): void {
    this.#subscriber.disconnect()
  }
}
