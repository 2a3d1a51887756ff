/**
 * The port (port.ts) on an ioredis 5 or 6 client. Everything kunci knows of ioredis is in this
 * folder: commands as `call`/`callBuffer`, or around the auto-pipeline (command.ts, for a client
 * of any ioredis copy whose Command class it can learn); the corked hit reads (reader.ts); the Cluster slot table; script
 * preloading on a standalone connection; subscribers and plain connections of kunci's own,
 * duplicated from the user's client or node connection (subscriber.ts, connection.ts).
 *
 * Around the auto-pipeline (`enableAutoPipelining`), for a client of any ioredis copy:
 * - **Cluster scripts: correctness.** ioredis files an auto-pipelined command under the slot of
 *   its first argument, taken as a key. For EVALSHA/EVAL that is the SHA or the source, not a
 *   key: every script call of a tick lands in one pipeline whatever its keys, and ioredis refuses
 *   the whole pipeline as soon as they live on two masters ("All keys in the pipeline should
 *   belong to the same slots allocation group"). `sendCommand` routes by the real keys and
 *   follows MOVED/ASK as usual.
 * - **`direct` commands: speed.** The lock path already packs one tick's requests into one script
 *   call per node; the auto-pipeline only wrapped it in a Pipeline, a per-tick queue and a
 *   `nextTick` per reply, ~30 % more client CPU per acquire+release at concurrency 1
 *   (bench/RESULTS.md). The cache's standalone script calls keep the auto-pipeline, which merges
 *   a tick's calls into one write.
 * A client whose Command class cannot be learned (a wrapper without ioredis' `call`) keeps `call`
 * (on such a Cluster with auto-pipelining the ioredis bug above remains).
 */
import type { Cluster, Redis } from 'ioredis'
import type {
  Arg,
  ClusterView,
  Connection,
  ConnectionEvents,
  ConnectionOptions,
  NodeConn,
  RedisPort,
  SendOptions,
  Subscriber,
  SubscriberOptions,
} from '../port.js'
import { commandSender, type SendCommand } from './command.js'
import { connectionOptions, IoredisConnection } from './connection.js'
import { clusterReader, type ReadValue, standaloneReader } from './reader.js'
import { IoredisSubscriber, subscriberOptions } from './subscriber.js'
import type { RedisClient } from './types.js'

/**
 * Cluster or standalone, by the `isCluster` flag ioredis sets on both classes rather than by
 * `instanceof`: a user's ioredis may be another copy or major version than the one we import.
 */
export function isIoredisCluster(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true
}

/** An ioredis client (checked after node-redis, which has no `evalsha`): it has `evalsha`. */
export function isIoredis(value: object): value is RedisClient {
  return typeof (value as { evalsha?: unknown }).evalsha === 'function'
}

/** A client's options; a stand-in client in a unit test may have none. */
function optionsOf<O extends object>(client: { readonly options: O }): Partial<O> {
  return client.options ?? {}
}

export function ioredisPort(client: RedisClient): RedisPort {
  return isIoredisCluster(client) ? new IoredisClusterPort(client) : new IoredisStandalonePort(client)
}

const isScript = (command: string) => command === 'evalsha' || command === 'eval'

/**
 * How one client sends. Its commands are built here and given to `sendCommand` (what its own
 * methods do, minus their argument juggling), except the calls that should ride its
 * auto-pipeline; a client whose Command class is unknown (command.ts) gets `call`.
 */
class Sender {
  readonly #client: Redis | Cluster
  /** The raw sender, or null when the client's Command class is unknown. */
  readonly #own: SendCommand | null
  readonly #autoPipelining: boolean
  readonly #scriptsAround: boolean

  constructor(client: Redis | Cluster, cluster: boolean) {
    this.#client = client
    this.#own = commandSender(client) ?? null
    this.#autoPipelining = optionsOf(client).enableAutoPipelining === true
    this.#scriptsAround = cluster
  }

  send(command: string, args: readonly Arg[], options: SendOptions | undefined): Promise<unknown> {
    const binary = options?.binary === true
    const own = this.#own
    if (
      own !== null &&
      (!this.#autoPipelining || options?.direct === true || (this.#scriptsAround && isScript(command)))
    ) {
      return own(command, args, binary)
    }
    return binary ? this.#client.callBuffer(command, ...args) : this.#client.call(command, ...args)
  }
}

/** One node connection: a master (or replica) of a Cluster. */
class IoredisNode implements NodeConn {
  readonly address: string
  readonly #conn: Redis
  readonly #sender: Sender

  constructor(conn: Redis) {
    this.#conn = conn
    this.address = `${conn.options.host}:${conn.options.port}`
    this.#sender = new Sender(conn, false)
  }

  get ready(): boolean {
    return this.#conn.status === 'ready'
  }

  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    return this.#sender.send(command, args, options)
  }

  subscriber(options: SubscriberOptions): Subscriber {
    return new IoredisSubscriber(this.#conn.duplicate(subscriberOptions(options)), options.lazy === true)
  }

  connection(options: ConnectionOptions): Connection {
    return new IoredisConnection(this.#conn.duplicate(connectionOptions(options)))
  }
}

/**
 * The watchers of one client's connection events, behind one listener per event: every lock on
 * a client watches it (node-health.ts), and one listener each would pass Node's 10-listener
 * warning at the eleventh lock ("MaxListenersExceededWarning ... close listeners added").
 */
class ConnectionWatchers {
  readonly #client: Redis | Cluster
  readonly #watchers = new Set<ConnectionEvents>()
  #listening = false

  constructor(client: Redis | Cluster) {
    this.#client = client
  }

  readonly #close = (): void => {
    for (const w of [...this.#watchers]) w.close()
  }

  readonly #ready = (): void => {
    for (const w of [...this.#watchers]) w.ready()
  }

  add(events: ConnectionEvents): () => void {
    // A fresh object per call: the same events object watched twice is unwatched one at a time.
    const watcher: ConnectionEvents = { close: () => events.close(), ready: () => events.ready() }
    this.#watchers.add(watcher)
    if (!this.#listening) {
      this.#listening = true
      this.#client.on('close', this.#close)
      this.#client.on('ready', this.#ready)
    }
    return () => {
      this.#watchers.delete(watcher)
      if (this.#watchers.size > 0 || !this.#listening) return
      this.#listening = false
      this.#client.off('close', this.#close)
      this.#client.off('ready', this.#ready)
    }
  }
}

/** A standalone client: the port, and its server as a node (`node` is the port itself). */
class IoredisStandalonePort implements RedisPort, NodeConn {
  readonly library = 'ioredis'
  readonly cluster = undefined
  readonly node: NodeConn = this
  readonly keyPrefix: string
  readonly identity: string
  readonly address: string
  readonly #client: Redis
  readonly #sender: Sender
  #reader: ReadValue | undefined
  #watchers: ConnectionWatchers | undefined
  /** Scripts sent with SCRIPT LOAD on the current connection; cleared when it drops. */
  #loaded: Set<string> | undefined

  constructor(client: Redis) {
    this.#client = client
    this.#sender = new Sender(client, false)
    const o = optionsOf(client)
    this.keyPrefix = o.keyPrefix ?? ''
    this.address = o.path ? o.path : `${o.host ?? 'localhost'}:${o.port ?? 6379}`
    this.identity = o.path ? o.path : `${this.address}/${o.db ?? 0}`
  }

  get ready(): boolean {
    return this.#client.status === 'ready'
  }

  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    return this.#sender.send(command, args, options)
  }

  read(key: string): Promise<string | null> {
    this.#reader ??= standaloneReader(this.#client)
    return this.#reader(key)
  }

  /**
   * SCRIPT LOAD ahead of a script's first EVALSHA on this connection. Without it the first use
   * answers NOSCRIPT and is re-sent as EVAL a round trip later, after calls made behind it whose
   * scripts were cached: a release could then run on a node before the hand-over it follows, and
   * that node would keep the released lock for its whole TTL. Commands on one connection run in
   * order, and the load goes out directly, never later than an auto-pipelined EVALSHA, so it
   * needs no round trip of its own. A SCRIPT FLUSH on a live connection is not seen (the EVAL
   * fallback covers it).
   */
  preload(sha: string, source: string): void {
    let loaded = this.#loaded
    if (loaded === undefined) {
      const fresh = new Set<string>()
      loaded = fresh
      this.#loaded = fresh
      // The next connection may reach a restarted node, whose script cache is empty.
      this.#client.on('close', () => fresh.clear())
    }
    if (loaded.has(sha)) return
    loaded.add(sha)
    // A failed load only costs the EVAL fallback.
    this.#sender.send('script', ['LOAD', source], { direct: true }).catch(() => {})
  }

  watch(events: ConnectionEvents): () => void {
    this.#watchers ??= new ConnectionWatchers(this.#client)
    return this.#watchers.add(events)
  }

  subscriber(options: SubscriberOptions): Subscriber {
    return new IoredisSubscriber(this.#client.duplicate(subscriberOptions(options)), options.lazy === true)
  }

  connection(options: ConnectionOptions): Connection {
    return new IoredisConnection(this.#client.duplicate(connectionOptions(options)))
  }
}

class IoredisClusterPort implements RedisPort, ClusterView {
  readonly library = 'ioredis'
  readonly cluster: ClusterView = this
  readonly node = undefined
  readonly keyPrefix: string
  readonly identity = 'cluster'
  readonly #client: Cluster
  readonly #sender: Sender
  #reader: ReadValue | undefined
  #watchers: ConnectionWatchers | undefined
  /** One NodeConn per ioredis node connection. */
  readonly #nodes = new WeakMap<Redis, IoredisNode>()

  constructor(client: Cluster) {
    this.#client = client
    this.#sender = new Sender(client, true)
    const o = optionsOf(client)
    this.keyPrefix = o.keyPrefix ?? o.redisOptions?.keyPrefix ?? ''
  }

  get ready(): boolean {
    return this.#client.status === 'ready'
  }

  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    return this.#sender.send(command, args, options)
  }

  read(key: string): Promise<string | null> {
    this.#reader ??= clusterReader(this.#client)
    return this.#reader(key)
  }

  /** Not on a Cluster client: SCRIPT LOAD would reach one node, not the key's. */
  preload(): void {}

  watch(events: ConnectionEvents): () => void {
    this.#watchers ??= new ConnectionWatchers(this.#client)
    return this.#watchers.add(events)
  }

  subscriber(options: SubscriberOptions): Subscriber {
    // A Cluster subscriber follows the cluster on its own (release notifications); a subscriber
    // that must see every drop (the cache bus) is opened on one node instead (nodes()).
    return new IoredisSubscriber(
      this.#client.duplicate(undefined, subscriberOptions(options)),
      options.lazy === true,
    )
  }

  masters(): readonly NodeConn[] {
    return this.#client.nodes('master').map((n) => this.#node(n))
  }

  nodes(): readonly NodeConn[] {
    return this.#client.nodes('all').map((n) => this.#node(n))
  }

  ownerOf(slot: number): string | undefined {
    return this.#client.slots[slot]?.[0]
  }

  refresh(): Promise<void> {
    // A failed refresh is not fatal: the caller's next command fails again and it decides.
    return new Promise((resolve) => this.#client.refreshSlotsCache(() => resolve()))
  }

  async whenReady(): Promise<void> {
    // Connects a lazy client and loads the slot table.
    if (this.#client.status !== 'ready') await this.#client.ping()
  }

  #node(conn: Redis): IoredisNode {
    let node = this.#nodes.get(conn)
    if (!node) {
      node = new IoredisNode(conn)
      this.#nodes.set(conn, node)
    }
    return node
  }
}
