/**
 * The clients kunci accepts, and the one place that tells them apart: ioredis 5/6 `Redis` and
 * `Cluster` are used as they are; node-redis v5 clients and clusters are wrapped once
 * (node-redis-adapter.ts) so that the internals, written and profiled against ioredis, run
 * unchanged. The entry points (Redlock, RedisLock, Cache, scanKeys/deleteByPattern) call
 * `toRedisClient`; nothing past them knows which library the user chose.
 */
import { InvalidOptionError } from '../errors.js'
import type { RedisClient } from './lua-script.js'
import {
  isNodeRedis,
  type NodeRedisClient,
  type NodeRedisConnection,
  NodeRedisStandalone,
  respVersion,
} from './node-redis-adapter.js'
import { isNodeRedisCluster, type NodeRedisCluster, NodeRedisClusterAdapter } from './node-redis-cluster.js'

export type { NodeRedisClient } from './node-redis-adapter.js'
export type { NodeRedisCluster } from './node-redis-cluster.js'

/**
 * Any client kunci accepts: an ioredis 5/6 `Redis` or `Cluster`, or a node-redis v5 client
 * (`createClient()`) or cluster (`createCluster()`) that is connected and speaks RESP2.
 */
export type KunciClient = RedisClient | NodeRedisClient | NodeRedisCluster

/** One wrapper per node-redis client, so managers sharing a client share its listeners. */
const wrapped = new WeakMap<object, RedisClient>()

/** Is `value` an ioredis client (or a node-redis client kunci already wrapped)? */
function isIoRedisShaped(value: object): boolean {
  return typeof (value as { evalsha?: unknown }).evalsha === 'function'
}

/**
 * The client the internals use for `value`, or an `InvalidOptionError` naming `option` when it
 * is no client kunci supports, a node-redis client not connected yet, or one speaking RESP3.
 * `label` names the value in the message (e.g. `clients[2]`).
 */
export function toRedisClient(value: unknown, option: string, label = option): RedisClient {
  if (value === null || typeof value !== 'object') throw notAClient(option, label)
  if (isNodeRedis(value)) {
    const known = wrapped.get(value)
    if (known) return known
    if (respVersion(value) !== 2) {
      throw new InvalidOptionError(
        option,
        `${label}: the node-redis client speaks RESP3: create it with RESP: 2 (the default), as kunci reads RESP2 replies.`,
      )
    }
    const c = value as { isOpen: boolean }
    if (!c.isOpen) {
      throw new InvalidOptionError(
        option,
        `${label}: the node-redis client is not connected: call \`await client.connect()\` before ` +
          'handing it to kunci (kunci never opens or closes the clients it is given).',
      )
    }
    // The wrappers carry the subset of ioredis' API the internals call (see the adapter).
    const adapter = (isNodeRedisCluster(value)
      ? new NodeRedisClusterAdapter(value as NodeRedisCluster)
      : new NodeRedisStandalone(value as NodeRedisConnection)) as unknown as RedisClient
    wrapped.set(value, adapter)
    return adapter
  }
  if (isIoRedisShaped(value)) return value as RedisClient
  throw notAClient(option, label)
}

function notAClient(option: string, label: string): InvalidOptionError {
  return new InvalidOptionError(
    option,
    `${label}: expected an ioredis Redis or Cluster, or a connected node-redis v5 client (createClient) or cluster (createCluster).`,
  )
}
