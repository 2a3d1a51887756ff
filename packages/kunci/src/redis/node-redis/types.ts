/**
 * What kunci needs of node-redis v5 clients, structurally: nothing is imported from 'redis' (a
 * user may have only ioredis). The real types (`RedisClientType`, `RedisClusterType` with any
 * modules) are assignable to the two public interfaces without a cast.
 */

export type Arg = string | Buffer
// biome-ignore lint/suspicious/noExplicitAny: the shape of EventEmitter listeners, so that node-redis' own types fit
export type Listener = (...args: any[]) => void

/** Command options kunci passes to node-redis: only the reply type mapping. */
export interface NodeRedisCommandOptions {
  typeMapping?: Record<number, unknown>
}

/**
 * A node-redis v5 standalone client (`createClient()`), connected (`await client.connect()`)
 * and speaking RESP2 (the default).
 */
export interface NodeRedisClient {
  readonly isOpen: boolean
  readonly isReady: boolean
  sendCommand(args: readonly Arg[], options?: NodeRedisCommandOptions): Promise<unknown>
  duplicate(overrides?: object): unknown
  connect(): Promise<unknown>
}

/** One node of a node-redis cluster, as listed in `masters` and `slots[i].master`. */
export interface NodeRedisClusterNode {
  readonly host: string
  readonly port: number
  readonly client?: unknown
}

/** What kunci needs of a node-redis v5 cluster (`createCluster()`), connected first. */
export interface NodeRedisCluster {
  readonly isOpen: boolean
  readonly masters: readonly NodeRedisClusterNode[]
  readonly replicas: readonly NodeRedisClusterNode[]
  readonly slots: readonly ({ master: NodeRedisClusterNode } | undefined)[]
  sendCommand(
    firstKey: Arg | undefined,
    isReadonly: boolean | undefined,
    args: Arg[],
    options?: NodeRedisCommandOptions,
  ): Promise<unknown>
  nodeClient(node: NodeRedisClusterNode): unknown
  duplicate(overrides?: object): unknown
  connect(): Promise<unknown>
}

/** The EventEmitter members node-redis clients have and their public types leave out. */
export interface Events {
  on(event: string, listener: Listener): unknown
}

/** The pub/sub half of a node-redis client (or cluster) that a subscriber needs. */
export interface NodeRedisPubSub extends Events {
  readonly isOpen: boolean
  readonly isReady?: boolean
  connect(): Promise<unknown>
  subscribe(
    channels: string[],
    listener: (message: Buffer, channel: Buffer) => void,
    bufferMode: true,
  ): Promise<unknown>
  unsubscribe(
    channels: string[],
    listener: (message: Buffer, channel: Buffer) => void,
    bufferMode: true,
  ): Promise<unknown>
  destroy(): unknown
  close?(): Promise<unknown>
}

/**
 * Replies as strings whatever the client's own `commandOptions.typeMapping` says: the internals
 * parse strings. (An empty mapping is node-redis' default: strings, numbers, arrays, null.)
 */
export const STRING_REPLIES: NodeRedisCommandOptions = Object.freeze({ typeMapping: {} })

/** RESP type byte of a bulk string (`$`): mapped to Buffer for keys that may not be UTF-8. */
const BLOB_STRING = 36
export const BUFFER_REPLIES: NodeRedisCommandOptions = Object.freeze({
  typeMapping: Object.freeze({ [BLOB_STRING]: Buffer }),
})

/** A node-redis v5 client (or cluster): `isOpen` and `sendCommand`, which ioredis lacks or differs on. */
export function isNodeRedis(value: unknown): value is NodeRedisClient | NodeRedisCluster {
  const v = value as { isOpen?: unknown; sendCommand?: unknown; duplicate?: unknown } | null
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.isOpen === 'boolean' &&
    typeof v.sendCommand === 'function' &&
    typeof v.duplicate === 'function'
  )
}

/** A node-redis cluster: `nodeClient` and `masters`, which a standalone client lacks. */
export function isNodeRedisCluster(value: NodeRedisClient | NodeRedisCluster): value is NodeRedisCluster {
  const v = value as { nodeClient?: unknown; masters?: unknown }
  return typeof v.nodeClient === 'function' && Array.isArray(v.masters)
}

/** The RESP version the node-redis client was created with (`RESP` option), 2 when unset. */
export function respVersion(client: object): number {
  const c = client as { options?: { RESP?: number }; _options?: { RESP?: number } }
  return (c.options ?? c._options)?.RESP ?? 2
}

/** Command arguments as node-redis wants them: strings or buffers only. */
export function commandArgs(command: string, args: readonly (string | number | Buffer)[]): Arg[] {
  const out: Arg[] = new Array(args.length + 1)
  out[0] = command
  for (let i = 0; i < args.length; i++) {
    const v = args[i]!
    out[i + 1] = typeof v === 'number' ? String(v) : v
  }
  return out
}
