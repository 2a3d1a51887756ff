/**
 * node-redis v5 (`createClient()` from `redis`) behind the part of the ioredis API that kunci's
 * internals call. kunci was built and profiled on ioredis; rather than route every call of the
 * lock hot path through a new abstraction, a node-redis client is wrapped once, at the entry
 * points (see client.ts), and the internals keep calling `evalsha`, `info`, `on('close')`...
 * An ioredis client is never wrapped, so its path is unchanged.
 *
 * Everything here is structural: nothing is imported from 'redis' (a user may have only ioredis),
 * and nothing from 'ioredis' at runtime (a user may have only redis).
 *
 * What the wrapper guarantees to the internals:
 *   - replies as ioredis gives them in RESP2: integers as numbers, bulk strings as strings
 *     (buffers for the `*Buffer` calls), arrays, `null`; Redis errors reject with node-redis'
 *     `ErrorReply`, whose message starts with the Redis error code, as reply-error.ts expects;
 *   - `close` when a ready connection drops (node-redis only says `reconnecting`/`end`), then
 *     `ready` on the next connection: the restart check in lock/node-link.ts needs both;
 *   - `duplicate()` gives a subscriber with ioredis' pub/sub surface (see NodeRedisSubscriber).
 */
import { EventEmitter } from 'node:events'

type Arg = string | Buffer
// biome-ignore lint/suspicious/noExplicitAny: the shape of EventEmitter listeners, so that node-redis' own types fit
type Listener = (...args: any[]) => void

/** Command options kunci passes to node-redis: only the reply type mapping. */
export interface NodeRedisCommandOptions {
  typeMapping?: Record<number, unknown>
}

/**
 * A node-redis v5 standalone client (`createClient()`), connected (`await client.connect()`)
 * and speaking RESP2 (the default). Only the members kunci tells it apart by: the real type
 * (`RedisClientType` with any modules) is assignable to it without a cast.
 */
export interface NodeRedisClient {
  readonly isOpen: boolean
  readonly isReady: boolean
  sendCommand(args: readonly Arg[], options?: NodeRedisCommandOptions): Promise<unknown>
  duplicate(overrides?: object): unknown
  connect(): Promise<unknown>
}

/** The node-redis client members the wrapper calls (EventEmitter's, which the public type leaves out). */
export interface NodeRedisConnection extends NodeRedisClient {
  on(event: string, listener: Listener): unknown
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
export function isNodeRedis(value: unknown): boolean {
  const v = value as { isOpen?: unknown; sendCommand?: unknown; duplicate?: unknown } | null
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.isOpen === 'boolean' &&
    typeof v.sendCommand === 'function' &&
    typeof v.duplicate === 'function'
  )
}

/** The RESP version the node-redis client was created with (`RESP` option), 2 when unset. */
export function respVersion(client: object): number {
  const o =
    (client as { options?: { RESP?: number }; _options?: { RESP?: number } }).options ??
    (client as { _options?: { RESP?: number } })._options
  return o?.RESP ?? 2
}

/** EVALSHA/EVAL arguments as node-redis wants them: strings or buffers only. */
export function scriptArgs(
  command: string,
  script: string,
  numkeys: number | string,
  rest: readonly (string | number | Buffer)[],
): Arg[] {
  const out: Arg[] = new Array(rest.length + 3)
  out[0] = command
  out[1] = script
  out[2] = String(numkeys)
  for (let i = 0; i < rest.length; i++) {
    const v = rest[i]!
    out[i + 3] = typeof v === 'number' ? String(v) : v
  }
  return out
}

export function stringArgs(command: readonly (string | number | Buffer)[]): Arg[] {
  return command.map((v) => (typeof v === 'number' ? String(v) : v))
}

/** ioredis-style `duplicate()` options kunci uses, in node-redis terms. */
export interface SubscriberOptions {
  lazyConnect?: boolean
  retryStrategy?: (times: number) => number | null | undefined
  connectTimeout?: number
  connectionName?: string
  enableOfflineQueue?: boolean
}

/** The node-redis overrides for `duplicate()` that match ioredis-style subscriber options. */
export function subscriberOverrides(base: object, o: SubscriberOptions | undefined): object {
  const socket = { ...((base as { options?: { socket?: object } }).options?.socket ?? {}) } as Record<
    string,
    unknown
  >
  const out: Record<string, unknown> = { disableOfflineQueue: false }
  // A retry strategy that answers null means "never reconnect": the owner reconnects itself.
  if (o?.retryStrategy && o.retryStrategy(1) == null) socket.reconnectStrategy = false
  if (o?.connectTimeout !== undefined) socket.connectTimeout = o.connectTimeout
  if (o?.connectionName !== undefined) out.name = o.connectionName
  out.socket = socket
  return out
}

/** The pub/sub half of a node-redis client (or cluster) that a subscriber needs. */
export interface NodeRedisPubSub {
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
  on(event: string, listener: Listener): unknown
}

/**
 * A subscriber connection kunci created with `duplicate()`, shaped like an ioredis subscriber:
 * `subscribe(...channels)`, `message`/`messageBuffer` events, `ping`, `quit`, `disconnect`,
 * and `close` when the connection drops. Its errors are caught here (node-redis throws an
 * `error` event nobody listens to); they surface as `close` and failed commands, as the owners
 * of subscribers expect.
 */
export class NodeRedisSubscriber extends EventEmitter {
  readonly #c: NodeRedisPubSub
  readonly #ping: () => Promise<unknown>
  #connecting: Promise<void> | undefined
  #closedEmitted = false

  constructor(client: NodeRedisPubSub, lazy: boolean, ping: () => Promise<unknown>) {
    super()
    this.#c = client
    this.#ping = ping
    client.on('error', (err: Error) => {
      if (this.listenerCount('error') > 0) this.emit('error', err)
      // Without reconnection node-redis reports a dropped socket only as an error.
      if (client.isReady === false) this.#emitClose()
    })
    client.on('reconnecting', () => this.#emitClose())
    client.on('end', () => this.#emitClose())
    client.on('ready', () => {
      this.#closedEmitted = false
    })
    if (!lazy) this.connect().catch(() => {})
  }

  connect(): Promise<void> {
    this.#connecting ??= this.#c.connect().then(() => undefined)
    return this.#connecting
  }

  subscribe(...channels: string[]): Promise<unknown> {
    return this.#c.subscribe(channels, this.#onMessage, true)
  }

  unsubscribe(...channels: string[]): Promise<unknown> {
    return this.#c.unsubscribe(channels, this.#onMessage, true)
  }

  ping(): Promise<unknown> {
    return this.#ping()
  }

  async quit(): Promise<void> {
    if (!this.#c.isOpen) return
    if (this.#c.close) await this.#c.close()
    else this.disconnect()
  }

  disconnect(): void {
    // node-redis throws when the client is closed already (e.g. it gave up reconnecting).
    try {
      if (this.#c.isOpen) this.#c.destroy()
    } catch {}
  }

  #emitClose(): void {
    if (this.#closedEmitted) return
    this.#closedEmitted = true
    this.emit('close')
  }

  #onMessage = (message: Buffer, channel: Buffer): void => {
    if (this.listenerCount('messageBuffer') > 0) this.emit('messageBuffer', channel, message)
    if (this.listenerCount('message') > 0) this.emit('message', channel.toString(), message.toString())
  }
}

/**
 * A node-redis standalone client as kunci's internals see it (the ioredis `Redis` calls they
 * make). `isCluster` is false; `options` gives host/port/db for the same-node check of Redlock.
 */
export class NodeRedisStandalone extends EventEmitter {
  readonly isCluster = false
  readonly client: NodeRedisConnection
  #up: boolean

  constructor(client: NodeRedisConnection) {
    super()
    this.client = client
    this.#up = client.isReady
    // No 'error' listener on the user's client: whether an error event crashes their process
    // stays their choice. 'reconnecting' follows every drop the client recovers from.
    client.on('ready', () => {
      this.#up = true
      this.emit('ready')
    })
    client.on('reconnecting', this.#down)
    client.on('end', this.#down)
  }

  /** ioredis' connection status, as far as kunci reads it ('ready' or not). */
  get status(): string {
    return this.client.isReady ? 'ready' : this.client.isOpen ? 'connecting' : 'end'
  }

  get options(): { host?: string; port?: number; path?: string; db?: number } {
    const o = (
      this.client as {
        options?: { socket?: { host?: string; port?: number; path?: string }; database?: number }
      }
    ).options
    const s = o?.socket
    return { host: s?.host ?? 'localhost', port: s?.port ?? 6379, path: s?.path, db: o?.database ?? 0 }
  }

  evalsha(sha: string, numkeys: number | string, ...rest: (string | number | Buffer)[]): Promise<unknown> {
    return this.client.sendCommand(scriptArgs('EVALSHA', sha, numkeys, rest), STRING_REPLIES)
  }

  eval(source: string, numkeys: number | string, ...rest: (string | number | Buffer)[]): Promise<unknown> {
    return this.client.sendCommand(scriptArgs('EVAL', source, numkeys, rest), STRING_REPLIES)
  }

  get(key: string): Promise<unknown> {
    return this.client.sendCommand(['GET', key], STRING_REPLIES)
  }

  mget(...keys: string[]): Promise<unknown> {
    return this.client.sendCommand(['MGET', ...keys], STRING_REPLIES)
  }

  hmget(key: string, ...fields: string[]): Promise<unknown> {
    return this.client.sendCommand(['HMGET', key, ...fields], STRING_REPLIES)
  }

  zrem(key: string, ...members: string[]): Promise<unknown> {
    return this.client.sendCommand(['ZREM', key, ...members], STRING_REPLIES)
  }

  publish(channel: string, message: string): Promise<unknown> {
    return this.client.sendCommand(['PUBLISH', channel, message], STRING_REPLIES)
  }

  del(...keys: Arg[]): Promise<unknown> {
    return this.client.sendCommand(['DEL', ...keys], STRING_REPLIES)
  }

  unlink(...keys: Arg[]): Promise<unknown> {
    return this.client.sendCommand(['UNLINK', ...keys], STRING_REPLIES)
  }

  scan(cursor: string | number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(stringArgs(['SCAN', cursor, ...args]), STRING_REPLIES)
  }

  scanBuffer(cursor: string | number, ...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(stringArgs(['SCAN', cursor, ...args]), BUFFER_REPLIES)
  }

  ping(): Promise<unknown> {
    return this.client.sendCommand(['PING'], STRING_REPLIES)
  }

  info(...section: string[]): Promise<unknown> {
    return this.client.sendCommand(['INFO', ...section], STRING_REPLIES)
  }

  config(...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(stringArgs(['CONFIG', ...args]), STRING_REPLIES)
  }

  script(...args: (string | number)[]): Promise<unknown> {
    return this.client.sendCommand(stringArgs(['SCRIPT', ...args]), STRING_REPLIES)
  }

  wait(replicas: number, timeoutMs: number): Promise<unknown> {
    return this.client.sendCommand(['WAIT', String(replicas), String(timeoutMs)], STRING_REPLIES)
  }

  /** A subscriber connection to the same server, owned by the caller (it must close it). */
  duplicate(options?: SubscriberOptions): NodeRedisSubscriber {
    const c = this.client.duplicate(subscriberOverrides(this.client, options)) as NodeRedisPubSub &
      NodeRedisClient
    return new NodeRedisSubscriber(c, options?.lazyConnect === true, () => c.sendCommand(['PING']))
  }

  #down = (): void => {
    if (!this.#up) return
    this.#up = false
    this.emit('close')
  }
}
