/**
 * The clients kunci accepts, and the one place that tells them apart: each is wrapped once in
 * its library's adapter of the port (port.ts): redis/ioredis/ for ioredis 5/6 `Redis` and
 * `Cluster`, redis/node-redis/ for node-redis v5 clients and clusters. The entry points
 * (Redlock, RedisLock, Cache, scanKeys/deleteByPattern, fencedWrite, Script) call `toRedisPort`;
 * nothing past them knows which library the user chose.
 */
import { InvalidOptionError } from '../errors.js'
import { ioredisPort, isIoredis } from './ioredis/port.js'
import type { AnyIoredisClient, RedisClient } from './ioredis/types.js'
import { NodeRedisClusterPort } from './node-redis/cluster.js'
import { NodeRedisStandalonePort } from './node-redis/standalone.js'
import {
  isNodeRedis,
  isNodeRedisCluster,
  type NodeRedisClient,
  type NodeRedisCluster,
  respVersion,
} from './node-redis/types.js'
import type { RedisPort } from './port.js'

export type { AnyIoredisClient, RedisClient } from './ioredis/types.js'
export type { NodeRedisClient, NodeRedisCluster } from './node-redis/types.js'

/**
 * Any client kunci accepts: an ioredis 5/6 `Redis` or `Cluster` (of whichever copy of ioredis:
 * `AnyIoredisClient`), or a node-redis v5 client (`createClient()`) or cluster
 * (`createCluster()`) that is connected and speaks RESP2.
 */
export type KunciClient = RedisClient | AnyIoredisClient | NodeRedisClient | NodeRedisCluster

/** One port per client, so managers sharing a client share its adapter (and its listeners). */
const ports = new WeakMap<object, RedisPort>()

/**
 * The port the internals use for `value`, or an `InvalidOptionError` naming `option` when it
 * is no client kunci supports, a node-redis client not connected yet, or one speaking RESP3.
 * `label` names the value in the message (e.g. `clients[2]`).
 */
export function toRedisPort(value: unknown, option: string, label = option): RedisPort {
  if (value === null || typeof value !== 'object') throw notAClient(option, label)
  const known = ports.get(value)
  if (known) return known
  let port: RedisPort
  if (isNodeRedis(value)) {
    if (respVersion(value) !== 2) {
      throw new InvalidOptionError(
        option,
        `${label}: the node-redis client speaks RESP3: create it with RESP: 2 (the default), as kunci reads RESP2 replies.`,
      )
    }
    if (!value.isOpen) {
      throw new InvalidOptionError(
        option,
        `${label}: the node-redis client is not connected: call \`await client.connect()\` before ` +
          'handing it to kunci (kunci never opens or closes the clients it is given).',
      )
    }
    // node-redis clients are EventEmitters; their public types leave `on` out.
    const events = value as typeof value & { on(event: string, listener: () => void): unknown }
    port = isNodeRedisCluster(value)
      ? new NodeRedisClusterPort(value as NodeRedisCluster & typeof events)
      : new NodeRedisStandalonePort(value as NodeRedisClient & typeof events)
  } else if (isIoredis(value)) {
    port = ioredisPort(value)
  } else {
    throw notAClient(option, label)
  }
  ports.set(value, port)
  return port
}

function notAClient(option: string, label: string): InvalidOptionError {
  return new InvalidOptionError(
    option,
    `${label}: expected an ioredis Redis or Cluster, or a connected node-redis v5 client (createClient) or cluster (createCluster).`,
  )
}
