import { saleKeys } from '../redis/keys.js'
import type { ShardChannels } from '../redis/shard-channels.js'

const CHANNEL = /^\{sale:([A-Za-z0-9_-]{1,64})\}:events$/

/** The sale a notification's channel belongs to, or undefined for any other channel. */
export function saleOfChannel(channel: string): string | undefined {
  return CHANNEL.exec(channel)?.[1]
}

/**
 * The sales' notifications, on each sale's own sharded channel (SSUBSCRIBE `{sale:<id>}:events`,
 * Redis 7): the master of the sale's slot delivers them, so a sale's crowd never costs the other
 * shards anything (classic PUBLISH is broadcast to every node of a Cluster). The channels follow
 * the sales' slots across failovers (redis/shard-channels.ts). A notification lost in a failover
 * is caught by the snapshots' per-second check.
 */
export class SaleEvents {
  readonly #channels: ShardChannels

  constructor(channels: ShardChannels) {
    this.#channels = channels
  }

  /** Subscribes to the sale's channel from now on (once; later calls do nothing). */
  watch(productId: string): void {
    this.#channels.subscribe(saleKeys(productId).events)
  }

  close(): void {
    this.#channels.close()
  }
}
