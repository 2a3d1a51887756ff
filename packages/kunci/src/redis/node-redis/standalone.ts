/**
 * The port (port.ts) on a node-redis v5 standalone client (`createClient()`). Commands go out
 * with `sendCommand` and string replies (Buffers for `binary`); node-redis writes the commands
 * of one tick in one socket write by itself, so there is nothing to cork or go around.
 * `close` is reported when a ready connection drops (node-redis only says `reconnecting` or
 * `end`), then `ready` on the next connection: the lock node link's restart check needs both.
 * No `error` listener goes on the user's client: whether an error event crashes their process
 * stays their choice.
 */
import type {
  Arg,
  Connection,
  ConnectionEvents,
  ConnectionOptions,
  NodeConn,
  RedisPort,
  SendOptions,
  Subscriber,
  SubscriberOptions,
} from '../port.js'
import { connectionOverrides, type NodeRedisConnClient, NodeRedisConnection } from './connection.js'
import { NodeRedisSubscriber, subscriberOverrides } from './subscriber.js'
import {
  BUFFER_REPLIES,
  commandArgs,
  type Events,
  type NodeRedisClient,
  type NodeRedisPubSub,
  STRING_REPLIES,
} from './types.js'

/** A standalone client: the port, and its server as a node (`node` is the port itself). */
export class NodeRedisStandalonePort implements RedisPort, NodeConn {
  readonly library = 'node-redis'
  readonly cluster = undefined
  readonly node: NodeConn = this
  readonly keyPrefix = ''
  readonly identity: string
  readonly address: string
  readonly #client: NodeRedisClient & Events
  #up: boolean
  readonly #watchers = new Set<ConnectionEvents>()
  /** Scripts sent with SCRIPT LOAD on the current connection; cleared when it drops. */
  readonly #loaded = new Set<string>()

  constructor(client: NodeRedisClient & Events) {
    this.#client = client
    this.#up = client.isReady
    const o = (
      client as { options?: { socket?: { host?: string; port?: number; path?: string }; database?: number } }
    ).options
    const s = o?.socket
    this.address = s?.path ? s.path : `${s?.host ?? 'localhost'}:${s?.port ?? 6379}`
    this.identity = s?.path ? s.path : `${this.address}/${o?.database ?? 0}`
    client.on('ready', () => {
      this.#up = true
      for (const w of [...this.#watchers]) w.ready()
    })
    client.on('reconnecting', this.#down)
    client.on('end', this.#down)
  }

  get ready(): boolean {
    return this.#client.isReady
  }

  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    return this.#client.sendCommand(
      commandArgs(command, args),
      options?.binary ? BUFFER_REPLIES : STRING_REPLIES,
    )
  }

  read(key: string): Promise<string | null> {
    return this.#client.sendCommand(['GET', key], STRING_REPLIES) as Promise<string | null>
  }

  /** SCRIPT LOAD ahead of the first EVALSHA on this connection (see the ioredis adapter). */
  preload(sha: string, source: string): void {
    if (this.#loaded.has(sha)) return
    this.#loaded.add(sha)
    this.#client.sendCommand(['SCRIPT', 'LOAD', source], STRING_REPLIES).catch(() => {})
  }

  watch(events: ConnectionEvents): () => void {
    this.#watchers.add(events)
    return () => this.#watchers.delete(events)
  }

  subscriber(options: SubscriberOptions): Subscriber {
    const c = this.#client.duplicate(subscriberOverrides(this.#client, options)) as NodeRedisPubSub &
      NodeRedisClient
    return new NodeRedisSubscriber(c, options.lazy === true, () => c.sendCommand(['PING']))
  }

  connection(options: ConnectionOptions): Connection {
    const base = this.#client
    return new NodeRedisConnection(
      async () => base.duplicate(connectionOverrides(base, options)) as NodeRedisConnClient,
    )
  }

  #down = (): void => {
    if (!this.#up) return
    this.#up = false
    this.#loaded.clear()
    for (const w of [...this.#watchers]) w.close()
  }
}
