/**
 * The GET of a hit: all a fresh entry needs (a miss then runs cache-fetch.lua).
 *
 * On an ioredis Cluster the GET goes straight to the connection of the master that owns the
 * key's slot, and the GETs one tick sends to a master leave in one socket write (`cork` now,
 * `uncork` once the tick's callers have run). Why not `cluster.get()`: profiled on a 3+3
 * cluster with 64 callers (bench/cache/RESULTS.md, "Issue 9"), ioredis' Cluster path costs
 * ≈12 µs of client CPU per GET (a Cluster pipeline per node and tick, three slot computations,
 * a promise and a nextTick per command, one pipeline in flight per node), against ≈5 µs here.
 * Batching the GETs into one script call is not possible: every entry has its own slot
 * (cache-keys.ts), and a Cluster script may only touch keys of one slot.
 *
 * Nothing is weaker than `cluster.get()`: only masters are asked (a replica or a former master
 * answers MOVED, never a value), and any error at all (MOVED or ASK during a resharding, a
 * closed connection during a failover, LOADING, ...) sends the GET again through
 * `cluster.get()`, which follows redirections, refreshes the slot table and retries as the
 * user configured it. When the slot table or the master's connection is not known yet, or the
 * client is not an ioredis Cluster, the hit is a plain `client.get()`.
 *
 * Not ordered after a write that was not awaited: the GET may reach the node before a script
 * call that ioredis still holds in its auto-pipeline. An awaited write always comes first.
 */
import { keySlot } from '../cluster/slot.js'
import { isClusterClient, type RedisClient } from '../redis/lua-script.js'

export type ReadValue = (key: string) => Promise<string | null>

/** What the direct path needs of a master's connection (public ioredis `Redis` members). */
interface NodeConnection {
  readonly status: string
  readonly stream?: { cork(): void; uncork(): void; readonly writable?: boolean } | undefined
  readonly options: { host?: string; port?: number; keyPrefix?: string }
  get(key: string): Promise<string | null>
}

/** What it needs of the Cluster client (public ioredis `Cluster` members). */
interface ClusterView {
  readonly status: string
  readonly slots: (string[] | undefined)[]
  readonly options: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } }
  nodes(role: 'master'): NodeConnection[]
  get(key: string): Promise<string | null>
}

/** Returns the hit's GET for `client`. */
export function valueReader(client: RedisClient): ReadValue {
  if (!isClusterClient(client)) return (key) => client.get(key)
  const view = client as unknown as ClusterView
  // A key prefix is applied by the client that builds the command: the node connections and
  // the Cluster could disagree, so such clients keep ioredis' own path.
  if (
    !Array.isArray(view.slots) ||
    typeof view.nodes !== 'function' ||
    view.options?.keyPrefix ||
    view.options?.redisOptions?.keyPrefix
  ) {
    return (key) => client.get(key)
  }
  return new DirectReader(view).read
}

class DirectReader {
  readonly #cluster: ClusterView
  /** Master connections by node key ("host:port", as in `cluster.slots`). */
  #masters = new Map<string, NodeConnection>()
  /** Streams corked this tick, uncorked together once the tick's callers have queued. */
  #corked: { uncork(): void }[] = []

  constructor(cluster: ClusterView) {
    this.#cluster = cluster
  }

  read = (key: string): Promise<string | null> => {
    const cluster = this.#cluster
    const node = cluster.status === 'ready' ? this.#master(cluster.slots[keySlot(key)]?.[0]) : undefined
    if (node === undefined) return cluster.get(key)
    const stream = node.stream
    if (stream !== undefined && !this.#corked.includes(stream)) {
      stream.cork()
      if (this.#corked.push(stream) === 1) process.nextTick(this.#uncork)
    }
    return node.get(key).catch(() => cluster.get(key))
  }

  // process.nextTick runs after the promise reactions of the current turn: every caller woken
  // by one batch of replies has queued its next GET by then.
  #uncork = (): void => {
    const corked = this.#corked
    this.#corked = []
    for (const s of corked) s.uncork()
  }

  #master(nodeKey: string | undefined): NodeConnection | undefined {
    if (nodeKey === undefined) return undefined
    let node = this.#masters.get(nodeKey)
    if (node === undefined || node.status === 'end') {
      // A new master (failover, resharding) or a dropped connection: look again.
      this.#masters = new Map(
        this.#cluster.nodes('master').map((n) => [`${n.options.host}:${n.options.port}`, n]),
      )
      node = this.#masters.get(nodeKey)
    }
    return node !== undefined && node.status === 'ready' ? node : undefined
  }
}
