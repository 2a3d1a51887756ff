/**
 * node-redis v5 Cluster (`createCluster()` from `redis`) behind the ioredis `Cluster` calls
 * kunci's internals make: scripts routed by their first key, the masters and the slot table
 * for SCAN and WAIT (cluster/scan.ts, lock/redis-lock.ts), and subscribers (cache bus, release
 * notifications). See node-redis-adapter.ts for why this is a wrapper and not an abstraction.
 */
import { EventEmitter } from 'node:events'
import {
  BUFFER_REPLIES,
  type NodeRedisClient,
  type NodeRedisCommandOptions,
  type NodeRedisPubSub,
  NodeRedisSubscriber,
  STRING_REPLIES,
  type SubscriberOptions,
  scriptArgs,
  stringArgs,
  subscriberOverrides,
} from './node-redis-adapter.js'

type Arg = string | Buffer

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

interface ClusterEvents {
  on(event: string, listener: () => void): unknown
}

/** A node-redis cluster: `nodeClient` and `masters`, which a standalone client lacks. */
export function isNodeRedisCluster(value: unknown): boolean {
  const v = value as { nodeClient?: unknown; masters?: unknown }
  return typeof v.nodeClient === 'function' && Array.isArray(v.masters)
}

function nodeKey(node: NodeRedisClusterNode): string {
  return `${node.host}:${node.port}`
}

/** One master (or replica) as ioredis' `cluster.nodes()` gives it: `options`, SCAN, WAIT, duplicate. */
class NodeHandle {
  readonly options: { host: string; port: number }
  readonly #cluster: NodeRedisCluster
  readonly #node: NodeRedisClusterNode

  constructor(cluster: NodeRedisCluster, node: NodeRedisClusterNode) {
    this.#cluster = cluster
    this.#node = node
    this.options = { host: node.host, port: node.port }
  }

  /** 'ready' once node-redis has connected to the node (the cache's direct GET path reads it). */
  get status(): string {
    return (this.#node.client as { isReady?: boolean } | undefined)?.isReady ? 'ready' : 'connecting'
  }

  get(key: string): Promise<unknown> {
    return this.#send(['GET', key], STRING_REPLIES)
  }

  scan(cursor: string | number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(stringArgs(['SCAN', cursor, ...args]), STRING_REPLIES)
  }

  scanBuffer(cursor: string | number, ...args: (string | number)[]): Promise<unknown> {
    return this.#send(stringArgs(['SCAN', cursor, ...args]), BUFFER_REPLIES)
  }

  /** WAIT on the node's own connection: the one the cluster sent the script on. */
  wait(replicas: number, timeoutMs: number): Promise<unknown> {
    return this.#send(['WAIT', String(replicas), String(timeoutMs)], STRING_REPLIES)
  }

  /** A subscriber to this node only (the cache bus moves between nodes itself). */
  duplicate(options?: SubscriberOptions): NodeRedisSubscriber {
    const base = this.#node.client as NodeRedisClient | undefined
    if (!base) throw new Error(`no connection to cluster node ${nodeKey(this.#node)} yet`)
    const c = base.duplicate(subscriberOverrides(base, options)) as unknown as NodeRedisPubSub &
      NodeRedisClient
    return new NodeRedisSubscriber(c, options?.lazyConnect === true, () => c.sendCommand(['PING']))
  }

  async #send(args: Arg[], options: NodeRedisCommandOptions): Promise<unknown> {
    const client = (await this.#cluster.nodeClient(this.#node)) as NodeRedisClient
    return client.sendCommand(args, options)
  }
}

/**
 * A node-redis cluster as kunci's internals see it (the ioredis `Cluster` calls they make).
 * `close` is emitted when any node connection drops, so a vote sent before the drop and
 * answered after it is not counted (conservative: at worst a vote is wasted); a master's drop
 * also starts re-reading the slot table until the failover shows in it (#followFailover).
 */
export class NodeRedisClusterAdapter extends EventEmitter {
  readonly isCluster = true
  readonly client: NodeRedisCluster
  readonly options = Object.freeze({})
  #slotsOf: unknown
  #slots: string[][] = []

  /** Set while the slot table is being re-read until every master is reachable again. */
  #following = false

  constructor(cluster: NodeRedisCluster) {
    super()
    this.client = cluster
    const events = cluster as unknown as ClusterEvents
    events.on('node-reconnecting', () => {
      this.emit('close')
      this.#followFailover()
    })
    events.on('node-disconnect', () => this.emit('close'))
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
      if (!this.client.isOpen || this.client.masters.every(isUp)) {
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
    const slots = (this.client as unknown as { _slots?: { rediscover?(c: unknown): Promise<unknown> } })
      ._slots
    const masters = this.client.masters
    const from = (masters.find((m) => m.client && isUp(m)) ?? masters.find((m) => m.client))?.client
    if (typeof slots?.rediscover !== 'function' || !from) return false
    await slots.rediscover(from)
    return true
  }

  get status(): string {
    return this.client.isOpen ? 'ready' : 'end'
  }

  /**
   * The slot table as ioredis keeps it: slot → [master's `host:port`]. Rebuilt only when
   * node-redis replaces its own table (it builds a new one, in one go, on every rediscovery).
   */
  get slots(): string[][] {
    const table = this.client.slots
    if (table !== this.#slotsOf) {
      const out: string[][] = new Array(table.length)
      for (let i = 0; i < table.length; i++) {
        const shard = table[i]
        if (shard) out[i] = [nodeKey(shard.master)]
      }
      this.#slots = out
      this.#slotsOf = table
    }
    return this.#slots
  }

  nodes(role: 'master' | 'all' = 'all'): NodeHandle[] {
    const nodes = role === 'master' ? this.client.masters : [...this.client.masters, ...this.client.replicas]
    return nodes.filter((n) => role === 'master' || n.client).map((n) => new NodeHandle(this.client, n))
  }

  /**
   * Re-reads the slot table after a master failed mid-scan. node-redis has no public call for
   * this; its internal `rediscover` is used when present, otherwise only a MOVED reply makes
   * node-redis refresh (see #followFailover).
   */
  refreshSlotsCache(callback: (err?: Error) => void): void {
    this.#rediscover().then(
      () => callback(),
      (err: Error) => callback(err),
    )
  }

  evalsha(sha: string, numkeys: number | string, ...rest: (string | number | Buffer)[]): Promise<unknown> {
    return this.client.sendCommand(
      firstKey(numkeys, rest),
      false,
      scriptArgs('EVALSHA', sha, numkeys, rest),
      STRING_REPLIES,
    )
  }

  eval(source: string, numkeys: number | string, ...rest: (string | number | Buffer)[]): Promise<unknown> {
    return this.client.sendCommand(
      firstKey(numkeys, rest),
      false,
      scriptArgs('EVAL', source, numkeys, rest),
      STRING_REPLIES,
    )
  }

  get(key: string): Promise<unknown> {
    return this.client.sendCommand(key, true, ['GET', key], STRING_REPLIES)
  }

  /** Keys of one slot only, as on an ioredis Cluster. */
  mget(...keys: string[]): Promise<unknown> {
    return this.client.sendCommand(keys[0], true, ['MGET', ...keys], STRING_REPLIES)
  }

  hmget(key: string, ...fields: string[]): Promise<unknown> {
    return this.client.sendCommand(key, true, ['HMGET', key, ...fields], STRING_REPLIES)
  }

  zrem(key: string, ...members: string[]): Promise<unknown> {
    return this.client.sendCommand(key, false, ['ZREM', key, ...members], STRING_REPLIES)
  }

  /** PUBLISH reaches every node of a cluster from any node. */
  publish(channel: string, message: string): Promise<unknown> {
    return this.client.sendCommand(channel, false, ['PUBLISH', channel, message], STRING_REPLIES)
  }

  /** Keys of one slot only (callers group them with groupBySlot). */
  del(...keys: Arg[]): Promise<unknown> {
    return this.client.sendCommand(keys[0], false, ['DEL', ...keys], STRING_REPLIES)
  }

  unlink(...keys: Arg[]): Promise<unknown> {
    return this.client.sendCommand(keys[0], false, ['UNLINK', ...keys], STRING_REPLIES)
  }

  ping(): Promise<unknown> {
    return this.client.sendCommand(undefined, true, ['PING'], STRING_REPLIES)
  }

  /** A subscriber on the cluster's pub/sub node (release notifications); node-redis moves it on failures. */
  duplicate(_redisOptions?: unknown, options?: SubscriberOptions): NodeRedisSubscriber {
    const c = this.client.duplicate() as NodeRedisPubSub & NodeRedisCluster
    return new NodeRedisSubscriber(c, options?.lazyConnect === true, () =>
      c.sendCommand(undefined, true, ['PING'], STRING_REPLIES),
    )
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

function firstKey(numkeys: number | string, rest: readonly (string | number | Buffer)[]): Arg | undefined {
  if (Number(numkeys) === 0) return undefined
  const k = rest[0]
  return typeof k === 'number' ? String(k) : k
}
