/**
 * The port (port.ts) on a node-redis v5 cluster (`createCluster()`): commands routed by their
 * first key, the masters and the slot table for SCAN and WAIT, subscribers for the cache bus and
 * release notifications. `close` is reported when any node connection drops, so a vote sent
 * before the drop and answered after it is not counted (conservative: at worst a vote is
 * wasted); a master's drop also starts re-reading the slot table until the failover shows in it
 * (#followFailover).
 */
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
import { connectionOverrides, type NodeRedisConnClient, NodeRedisConnection } from './connection.js'
import { NodeRedisSubscriber, subscriberOverrides } from './subscriber.js'
import {
  BUFFER_REPLIES,
  commandArgs,
  type Events,
  type NodeRedisClient,
  type NodeRedisCluster,
  type NodeRedisClusterNode,
  type NodeRedisPubSub,
  STRING_REPLIES,
} from './types.js'

/** Commands node-redis may send to a replica when the user's cluster reads from replicas. */
const READONLY = new Set(['get', 'hmget', 'mget'])

function addressOf(node: NodeRedisClusterNode): string {
  return `${node.host}:${node.port}`
}

/** One master (or replica) of the cluster, on node-redis' own connection to it. */
class NodeRedisNode implements NodeConn {
  readonly address: string
  readonly #cluster: NodeRedisCluster
  readonly #node: NodeRedisClusterNode

  constructor(cluster: NodeRedisCluster, node: NodeRedisClusterNode) {
    this.#cluster = cluster
    this.#node = node
    this.address = addressOf(node)
  }

  /** true once node-redis has connected to the node. */
  get ready(): boolean {
    return (this.#node.client as { isReady?: boolean } | undefined)?.isReady === true
  }

  async send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    const client = (await this.#cluster.nodeClient(this.#node)) as NodeRedisClient
    return client.sendCommand(commandArgs(command, args), options?.binary ? BUFFER_REPLIES : STRING_REPLIES)
  }

  /** A subscriber to this node only (the cache bus moves between nodes itself). */
  subscriber(options: SubscriberOptions): Subscriber {
    const base = this.#node.client as NodeRedisClient | undefined
    if (!base) throw new Error(`no connection to cluster node ${this.address} yet`)
    const c = base.duplicate(subscriberOverrides(base, options)) as NodeRedisPubSub & NodeRedisClient
    return new NodeRedisSubscriber(c, options.lazy === true, () => c.sendCommand(['PING']))
  }

  /** A connection of its own to this node (node-redis connects the node's client first if needed). */
  connection(options: ConnectionOptions): Connection {
    return new NodeRedisConnection(async () => {
      const base = (await this.#cluster.nodeClient(this.#node)) as NodeRedisClient
      return base.duplicate(connectionOverrides(base, options)) as NodeRedisConnClient
    })
  }
}

export class NodeRedisClusterPort implements RedisPort, ClusterView {
  readonly library = 'node-redis'
  readonly cluster: ClusterView = this
  readonly node = undefined
  readonly keyPrefix = ''
  readonly identity = 'cluster'
  readonly #client: NodeRedisCluster
  readonly #watchers = new Set<ConnectionEvents>()
  /** Set while the slot table is being re-read until every master is reachable again. */
  #following = false

  constructor(cluster: NodeRedisCluster & Events) {
    this.#client = cluster
    cluster.on('node-reconnecting', () => {
      this.#closed()
      this.#followFailover()
    })
    cluster.on('node-disconnect', () => this.#closed())
  }

  get ready(): boolean {
    return this.#client.isOpen
  }

  send(command: string, args: readonly Arg[], options?: SendOptions): Promise<unknown> {
    const key = options?.key
    return this.#client.sendCommand(
      key,
      READONLY.has(command),
      commandArgs(command, args),
      options?.binary ? BUFFER_REPLIES : STRING_REPLIES,
    )
  }

  read(key: string): Promise<string | null> {
    return this.#client.sendCommand(key, true, ['GET', key], STRING_REPLIES) as Promise<string | null>
  }

  /** Not on a cluster: SCRIPT LOAD would reach one node, not the key's. */
  preload(): void {}

  watch(events: ConnectionEvents): () => void {
    this.#watchers.add(events)
    return () => this.#watchers.delete(events)
  }

  /** A subscriber on the cluster's pub/sub node (release notifications); node-redis moves it on failures. */
  subscriber(options: SubscriberOptions): Subscriber {
    const c = this.#client.duplicate() as NodeRedisPubSub & NodeRedisCluster
    return new NodeRedisSubscriber(c, options.lazy === true, () =>
      c.sendCommand(undefined, true, ['PING'], STRING_REPLIES),
    )
  }

  masters(): readonly NodeConn[] {
    return this.#client.masters.map((n) => new NodeRedisNode(this.#client, n))
  }

  nodes(): readonly NodeConn[] {
    return [...this.#client.masters, ...this.#client.replicas]
      .filter((n) => n.client)
      .map((n) => new NodeRedisNode(this.#client, n))
  }

  ownerOf(slot: number): string | undefined {
    const shard = this.#client.slots[slot]
    return shard ? addressOf(shard.master) : undefined
  }

  /**
   * Re-reads the slot table after a master failed. node-redis has no public call for this; its
   * internal `rediscover` is used when present, otherwise only a MOVED reply makes node-redis
   * refresh (see #followFailover).
   */
  async refresh(): Promise<void> {
    await this.#rediscover().catch(() => false)
  }

  async whenReady(): Promise<void> {}

  #closed(): void {
    for (const w of [...this.#watchers]) w.close()
  }

  /**
   * node-redis re-reads its slot table only when a live node answers MOVED or ASK. When a master
   * dies, every command for its slots is routed to its connection, which reconnects forever and
   * queues them: no node ever answers MOVED, and those slots hang for good even once the replica
   * is promoted. So while a master's connection is down, the table is re-read (every
   * FOLLOW_MIN_MS at first, backing off to FOLLOW_MAX_MS: each read opens a short connection);
   * once the promotion shows in it, node-redis drops the dead node (its queued commands fail,
   * kunci's callers see an error, not a hang) and routes to the new master. The loop ends when
   * every master in the table is connected, or the cluster is closed.
   */
  #followFailover(): void {
    if (this.#following) return
    this.#following = true
    let delayMs = FOLLOW_MIN_MS
    const tick = (): void => {
      if (!this.#client.isOpen || this.#client.masters.every(isUp)) {
        this.#following = false
        return
      }
      this.#rediscover().then(schedule, schedule)
    }
    const schedule = (): void => {
      // unref: a failover being followed must not keep the user's process alive.
      setTimeout(tick, delayMs).unref()
      delayMs = Math.min(delayMs * 2, FOLLOW_MAX_MS)
    }
    schedule()
  }

  /**
   * Re-reads the slot table through node-redis' internal `rediscover` (no public call exists),
   * from a connected master when there is one (node-redis asks that node first, then its root
   * nodes). Resolves false when this node-redis has no such method.
   */
  async #rediscover(): Promise<boolean> {
    const slots = (this.#client as { _slots?: { rediscover?(c: unknown): Promise<unknown> } })._slots
    const masters = this.#client.masters
    const from = (masters.find((m) => m.client && isUp(m)) ?? masters.find((m) => m.client))?.client
    if (typeof slots?.rediscover !== 'function' || !from) return false
    await slots.rediscover(from)
    return true
  }
}

/**
 * How often the slot table is re-read while a master is unreachable (see #followFailover): soon
 * after the drop, then at most once a second, so that a promotion (cluster-node-timeout plus an
 * election) is followed within a second of showing in the table.
 */
const FOLLOW_MIN_MS = 250
const FOLLOW_MAX_MS = 1000

/** A master whose connection is up, or not opened yet (node-redis connects on first use). */
function isUp(node: NodeRedisClusterNode): boolean {
  const c = node.client as { isReady?: boolean } | undefined
  return c === undefined || c.isReady === true
}
