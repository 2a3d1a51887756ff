/**
 * kunci's one port to Redis: the operations the internals really call, and nothing of any
 * client library. Each library has one adapter that implements it directly (redis/ioredis/,
 * redis/node-redis/), and the entry points wrap the user's client once (redis/client.ts).
 * Modelled on go-redsync's `redis.Pool`/`redis.Conn` and bentocache's driver interface.
 *
 * Replies are RESP2 as the internals parse them: integers as numbers, bulk strings as strings
 * (as Buffers with `binary`), arrays, `null`. Redis error replies reject with an Error whose
 * message starts with the Redis error code (reply-error.ts reads it).
 */

/** A command argument; numbers are sent as their decimal text. */
export type Arg = string | number | Buffer

export interface SendOptions {
  /**
   * Routes the command on a cluster: the first key it touches (`undefined`: any node, e.g.
   * PUBLISH, PING). Ignored on a standalone node.
   */
  readonly key?: string | Buffer | undefined
  /** Bulk-string replies as Buffers (binary keys from SCAN), not UTF-8 strings. */
  readonly binary?: boolean
  /**
   * The caller batches on its own (the lock node link packs a tick's requests into one script
   * call): go around a client-side auto-pipeline, which would only add a queue and a tick.
   */
  readonly direct?: boolean
}

/** Connection events the lock node link follows for its restart check. */
export interface ConnectionEvents {
  /** The connection dropped: replies may now come from a restarted server. */
  close(): void
  /** A (new) connection is ready for commands. */
  ready(): void
}

/** A pub/sub connection kunci opened; kunci closes it. */
export interface Subscriber {
  /** Connects a subscriber made `lazy`; the same promise on every call. */
  connect(): Promise<void>
  subscribe(channels: readonly string[]): Promise<void>
  unsubscribe(channels: readonly string[]): Promise<void>
  ping(): Promise<void>
  /** Every message on a subscribed channel: its channel name and raw payload. One listener. */
  onMessage(listener: ((channel: string, message: Buffer) => void) | undefined): void
  /** Called when the connection drops or fails (at most once per connection). */
  onClose(listener: () => void): void
  /** QUIT, or a hard disconnect if that fails. */
  close(): Promise<void>
  /** Drops the connection at once. */
  destroy(): void
}

export interface SubscriberOptions {
  /**
   * `true`: the client reconnects and resubscribes on its own, and queues commands meanwhile
   * (release notifications: a lost one costs a poll). `false`: it never reconnects and kunci
   * sees every drop (`onClose`) and opens a new one itself (the cache bus must know the exact
   * moments it is not subscribed).
   */
  readonly reconnect: boolean
  /** Do not connect until `connect()`. @defaultValue false */
  readonly lazy?: boolean
  readonly connectTimeoutMs?: number
  /** CLIENT SETNAME, so CLIENT LIST shows whose connection it is. */
  readonly name?: string
}

/**
 * A plain command connection kunci opened to one node, for a command that holds its connection
 * while it waits (WAIT): on a connection of its own it can hold nothing but itself, never the
 * user's client (STYLE.md §11). kunci closes it.
 *
 * It connects on `connect()` and never reconnects: after a drop every command fails, `closed`
 * is true, and the owner opens a new one. No auto-pipeline, no offline queue: a command goes
 * out when it is sent, in call order. Keys are sent as given (no client key prefix).
 */
export interface Connection {
  /** Connects (and logs in as the user's client does); the same promise on every call. */
  connect(): Promise<void>
  /** Dropped, failed to connect, or closed: open a new one. */
  readonly closed: boolean
  /** One command, after `connect()` resolved; replies as in `send` of the port. */
  send(command: string, args: readonly Arg[]): Promise<unknown>
  /** QUIT, or a hard disconnect if that fails. */
  close(): Promise<void>
  /** Drops the connection at once; commands in flight fail. */
  destroy(): void
}

export interface ConnectionOptions {
  /** How long `connect()` may take before it fails. */
  readonly connectTimeoutMs: number
  /** CLIENT SETNAME, so CLIENT LIST shows whose connection it is. */
  readonly name?: string
}

/** One connection to one server: a standalone node, or one node of a cluster. */
export interface NodeConn {
  /** `host:port` as the cluster's slot table names the node (a standalone node: its socket path if it has one). */
  readonly address: string
  /** Connected and ready for commands now. */
  readonly ready: boolean
  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown>
  /** A subscriber connection to this node only. */
  subscriber(options: SubscriberOptions): Subscriber
  /** A new plain command connection to this node only, with the user's client's settings (auth, TLS). */
  connection(options: ConnectionOptions): Connection
}

/** What kunci reads of a cluster, besides routing its commands by key. */
export interface ClusterView {
  /** The master connections known now. */
  masters(): readonly NodeConn[]
  /** Every node known now (masters and replicas): places for a subscriber. */
  nodes(): readonly NodeConn[]
  /** The address of the master that serves `slot` in the client's slot table, if known. */
  ownerOf(slot: number): string | undefined
  /** Re-reads the slot table (after a master failed); resolves even if that failed. */
  refresh(): Promise<void>
  /** Connected, slot table loaded (connects a lazy client). */
  whenReady(): Promise<void>
}

/** The client a user passed, as kunci's internals see it. */
export interface RedisPort {
  /** Which library the user's client comes from, for messages only. */
  readonly library: 'ioredis' | 'node-redis'
  /** Set for a cluster client: its masters and slot table. */
  readonly cluster: ClusterView | undefined
  /** The client applies this prefix to every key (ioredis `keyPrefix`); '' when none. */
  readonly keyPrefix: string
  /** Where a standalone client connects (`host:port/db` or a socket path), for the same-node check. */
  readonly identity: string
  /**
   * A standalone client's server as one node (its address, connections of kunci's own to it);
   * undefined on a cluster, whose nodes `cluster` lists.
   */
  readonly node: NodeConn | undefined
  /** Connected and ready for commands now. */
  readonly ready: boolean
  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown>
  /**
   * The GET of a cache hit: the adapter sends it the cheapest way it knows (one socket write
   * per tick and connection, straight to the owning master on a cluster).
   */
  read(key: string): Promise<string | null>
  /**
   * Asks the adapter to cache `source` (SHA `sha`) on the connection before the next EVALSHA if
   * it can do so without a round trip of its own (SCRIPT LOAD pipelined ahead of it on a
   * standalone connection, once per connection). A no-op where that is not possible (a cluster).
   */
  preload(sha: string, source: string): void
  /** Follows connection drops and reconnects; returns the function that stops it. */
  watch(events: ConnectionEvents): () => void
  /**
   * A new subscriber: on a standalone client, to the same server; on a cluster, on the cluster's
   * pub/sub (PUBLISH reaches every node of a cluster).
   */
  subscriber(options: SubscriberOptions): Subscriber
}
