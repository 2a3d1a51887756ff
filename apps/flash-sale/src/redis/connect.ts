import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis'
import { keySlot } from 'kunci'
import type { HostPort, ServiceConfig } from '../config.js'
import { ClusterAlone, StandaloneAlone } from './cluster-alone.js'
import type { AckRoute } from './replica-acks.js'
import { ShardChannels } from './shard-channels.js'

export type RedisClient = Redis | Cluster

/**
 * Client settings chosen for a checkout, where a command run twice is worse than one that fails:
 * no resend of commands that were in flight when a connection dropped, a bounded offline queue,
 * and auto-pipelining, which turns the concurrent checkouts of one tick into one write.
 *
 * `autoResendUnfulfilledCommands: false` does not cover the Cluster client's own retry: a command
 * in flight on a connection that closes fails with "Connection is closed." and ioredis' Cluster
 * sends it again (up to maxRedirections times), though the server may have run it. So every
 * script SQL depends on is safe to run twice (issue 37 item 3): reserve.lua by order id,
 * preload.lua by round, restock.lua by restock id, return-units.lua by order id.
 * test/integration/script-resend.test.ts drops the connection between a script's run and its
 * reply.
 */
type RedisAccess = Pick<ServiceConfig, 'redisUsername' | 'redisPassword' | 'redisTls'>

/** TLS (verifying the server against `redisTls.ca`, or the system's CAs) when configured. */
function tlsOption(config: RedisAccess): Pick<RedisOptions, 'tls'> {
  return config.redisTls ? { tls: { ...config.redisTls } } : {}
}

function nodeOptions(config: RedisAccess): RedisOptions {
  return {
    username: config.redisUsername,
    password: config.redisPassword,
    // For a Cluster these are the redisOptions of every node it discovers, so TLS reaches them all.
    ...tlsOption(config),
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 2,
    connectTimeout: 2_000,
    enableAutoPipelining: true,
  }
}

export function connectSaleRedis(
  config: Pick<ServiceConfig, 'redis'> & RedisAccess,
  name = 'flash-sale',
  /** Addresses the Cluster announces → where to connect instead (a test's fault proxy). */
  natMap?: ClusterOptions['natMap'],
): RedisClient {
  const options = { ...nodeOptions(config), connectionName: name }
  if ('url' in config.redis) return new Redis(config.redis.url, options)
  return new Cluster(config.redis.cluster, {
    redisOptions: options,
    enableAutoPipelining: true,
    // ioredis files an auto-pipelined EVALSHA/EVAL under the slot of its first argument (the
    // SHA or the source), not of its keys: one tick's scripts for sales on two masters would
    // share a pipeline that ioredis refuses whole. Scripts are sent on their own (the checkout's
    // group commit batches its reservations in explicit per-sale pipelines anyway).
    autoPipeliningIgnoredCommands: ['evalsha', 'eval'],
    scaleReads: 'master',
    // Failover takes seconds: keep retrying slot refreshes instead of failing the client.
    clusterRetryStrategy: (times) => Math.min(100 * times, 1_000),
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    maxRedirections: 16,
    slotsRefreshTimeout: 2_000,
    // A failed-over master is noticed within a second even by a client that only pipelines.
    slotsRefreshInterval: 1_000,
    // While the cluster client reconnects, fail at once (503, the user retries) rather than
    // queueing checkouts behind a dead master.
    enableOfflineQueue: false,
    ...(natMap && { natMap }),
  })
}

/**
 * The sales' sharded notifications (sale/sale-events.ts): a connection of its own per node that
 * serves a subscribed sale's slot, placed by the sale client's slot table (refreshed every
 * second), or one connection to a single node. See shard-channels.ts for why not ioredis'
 * `shardedSubscribers`.
 */
export function saleChannels(
  client: RedisClient,
  config: Pick<ServiceConfig, 'redis'> & RedisAccess,
  onMessage: (channel: string, message: string) => void,
  name = 'flash-sale-events',
): ShardChannels {
  const options: RedisOptions = {
    ...nodeOptions(config),
    connectionName: name,
    enableAutoPipelining: false,
    // ShardChannels replaces a closed connection at the node the slot table names then.
    retryStrategy: () => null,
    autoResubscribe: false,
  }
  const { redis } = config
  if ('url' in redis) {
    return new ShardChannels({
      route: () => redis.url,
      connect: () => new Redis(redis.url, options),
      onMessage,
    })
  }
  const cluster = client as Cluster
  return new ShardChannels({
    route: (slot) => cluster.slots[slot]?.[0],
    connect: (node) => {
      const colon = node.lastIndexOf(':')
      return new Redis({ ...options, host: node.slice(0, colon), port: Number(node.slice(colon + 1)) })
    },
    onMessage,
  })
}

/**
 * Routes replica confirmations (replica-acks.ts) to the node the sale client sends a slot to,
 * each over a connection of its own, so that a WAIT blocks nothing but itself.
 */
export function ackRoute(client: RedisClient, config: RedisAccess): AckRoute {
  const options: RedisOptions = {
    ...nodeOptions(config),
    connectionName: 'flash-sale-acks',
    enableAutoPipelining: false,
    // A round that cannot be sent fails (the reservation is answered unconfirmed, 202) instead of
    // waiting for a reconnect.
    maxRetriesPerRequest: 0,
    retryStrategy: (times) => Math.min(100 * times, 1_000),
  }
  // A dead node's connection errors until the round gives up on it; the round reports it.
  const quiet = (conn: Redis) => conn.on('error', () => {})
  if (!(client instanceof Cluster)) {
    return {
      nodeOf: () => 'standalone',
      connect: () => quiet(client.duplicate(options)),
      alone: new StandaloneAlone(),
    }
  }
  const connect = (node: string) => {
    const colon = node.lastIndexOf(':')
    return quiet(new Redis({ ...options, host: node.slice(0, colon), port: Number(node.slice(colon + 1)) }))
  }
  return {
    // ioredis keeps the slot table public (`slots[slot]` = [master, ...replicas] as host:port) and
    // updates it when it follows a MOVED, so this is where the reservation was just served.
    nodeOf: (key) => client.slots[keySlot(key)]?.[0],
    connect,
    // The other masters are asked at the addresses they announce (cluster-announce-ip).
    alone: new ClusterAlone({ connect }),
  }
}

/** One client per independent lock node, with the settings docs/locks.md recommends. */
export function connectLockNodes(nodes: HostPort[], config: RedisAccess): Redis[] {
  return nodes.map(
    (n, i) =>
      new Redis({
        host: n.host,
        port: n.port,
        username: config.redisUsername,
        password: config.redisPassword,
        ...tlsOption(config),
        connectionName: `flash-sale-lock-${i}`,
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
        connectTimeout: 1_000,
        retryStrategy: (times) => Math.min(50 * times, 500),
      }),
  )
}

/**
 * After a MOVED inside a pipeline: ioredis follows MOVED for single commands, and for a pipeline
 * only when every command of it was redirected. Ours pair a script with WAIT (which has no key and
 * so is never redirected), so the slot map must be refreshed by hand before the retry.
 */
export async function refreshSlots(client: RedisClient): Promise<void> {
  if (!(client as { isCluster?: boolean }).isCluster) return
  await new Promise<void>((resolve) => (client as Cluster).refreshSlotsCache(() => resolve()))
}

/**
 * Resolves once the client is connected (for a Cluster: the slot map is loaded). Clients without
 * an offline queue refuse commands before that, so processes wait here at start.
 */
export async function whenReady(client: RedisClient, timeoutMs = 20_000): Promise<void> {
  if (client.status === 'ready') return
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', onReady)
      reject(new Error(`Redis not ready after ${timeoutMs} ms (status ${client.status})`))
    }, timeoutMs)
    const onReady = () => {
      clearTimeout(timer)
      resolve()
    }
    client.once('ready', onReady)
  })
}
