/**
 * The GET of a hit: all a fresh entry needs (a miss then runs cache-fetch.lua). The GETs one
 * tick sends on a connection leave in one socket write (`cork` now, `uncork` once the tick's
 * callers have run), around ioredis' auto-pipeline when the client has it on.
 *
 * Why: profiled with 64 callers (bench/cache/RESULTS.md, "Issue 9"), ioredis' auto-pipeline
 * costs ≈8.7 µs of client CPU per GET on one node and ≈12 µs on a Cluster (a Pipeline per node
 * and tick, a promise and a nextTick per command, one pipeline in flight per node, and on a
 * Cluster three slot computations per command), against ≈5 µs for a corked direct write.
 * Batching the GETs into one script call is not possible on a Cluster: every entry has its own
 * slot (cache-keys.ts), and a Cluster script may only touch keys of one slot.
 *
 * On an ioredis Cluster the GET goes straight to the connection of the master that owns the
 * key's slot. Nothing is weaker than `cluster.get()`: only masters are asked (a replica or a
 * former master answers MOVED, never a value), and any error at all (MOVED or ASK during a
 * resharding, a closed connection during a failover, LOADING, ...) sends the GET again through
 * `cluster.get()`, which follows redirections, refreshes the slot table and retries as the
 * user configured it. When the slot table or the master's connection is not known yet, the hit
 * is a plain `cluster.get()`. A client of another ioredis copy or of node-redis keeps `get()`.
 *
 * Not ordered after a write that was not awaited: the GET may reach the node before a script
 * call that ioredis still holds in its auto-pipeline. An awaited write always comes first.
 */
import { keySlot } from '../cluster/slot.js'
import { autoPipelineBypass, commandSender } from '../redis/ioredis-command.js'
import { isClusterClient, type RedisClient } from '../redis/lua-script.js'

export type ReadValue = (key: string) => Promise<string | null>

interface Stream {
  cork(): void
  uncork(): void
}

/** What the direct path needs of one connection (public ioredis `Redis` members). */
interface Connection {
  readonly status: string
  readonly stream?: Stream | undefined
  readonly options: { host?: string; port?: number; keyPrefix?: string; enableAutoPipelining?: boolean }
  get(key: string): Promise<string | null>
}

/** What it needs of the Cluster client (public ioredis `Cluster` members). */
interface ClusterView {
  readonly status: string
  readonly slots: (string[] | undefined)[]
  readonly options: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } }
  nodes(role: 'master'): Connection[]
  get(key: string): Promise<string | null>
}

/** Returns the hit's GET for `client`. */
export function valueReader(client: RedisClient): ReadValue {
  if (!isClusterClient(client)) {
    // Only a client of kunci's own ioredis copy: its stream and sendCommand are known.
    if (commandSender(client) === undefined) return (key) => client.get(key)
    const conn = client as unknown as Connection
    const corker = new TickCorker()
    const get = getOf(conn)
    return (key) => {
      corker.cork(conn.stream)
      return get(key)
    }
  }
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
  return new ClusterReader(view).read
}

/** A connection's GET, sent around its auto-pipeline if it has one (ioredis-command.ts). */
function getOf(conn: Connection): (key: string) => Promise<string | null> {
  const send = autoPipelineBypass(conn)
  if (send === null) return (key) => conn.get(key)
  return (key) => send('get', [key]) as Promise<string | null>
}

/**
 * Corks each stream a GET is written to, and uncorks them all once the tick's callers have run:
 * process.nextTick runs after the promise reactions of the current turn, so every caller woken
 * by one batch of replies has queued its next GET by then, and they leave in one write.
 */
class TickCorker {
  #corked: Stream[] = []

  cork(stream: Stream | undefined): void {
    if (stream === undefined || this.#corked.includes(stream)) return
    stream.cork()
    if (this.#corked.push(stream) === 1) process.nextTick(this.#uncork)
  }

  #uncork = (): void => {
    const corked = this.#corked
    this.#corked = []
    for (const s of corked) s.uncork()
  }
}

interface Master {
  readonly conn: Connection
  readonly get: (key: string) => Promise<string | null>
}

class ClusterReader {
  readonly #cluster: ClusterView
  readonly #corker = new TickCorker()
  /** Master connections by node key ("host:port", as in `cluster.slots`). */
  #masters = new Map<string, Master>()

  constructor(cluster: ClusterView) {
    this.#cluster = cluster
  }

  read = (key: string): Promise<string | null> => {
    const cluster = this.#cluster
    const master = cluster.status === 'ready' ? this.#master(cluster.slots[keySlot(key)]?.[0]) : undefined
    if (master === undefined) return cluster.get(key)
    this.#corker.cork(master.conn.stream)
    return master.get(key).catch(() => cluster.get(key))
  }

  #master(nodeKey: string | undefined): Master | undefined {
    if (nodeKey === undefined) return undefined
    let master = this.#masters.get(nodeKey)
    if (master === undefined || master.conn.status === 'end') {
      // A new master (failover, resharding) or a dropped connection: look again.
      this.#masters = new Map(
        this.#cluster
          .nodes('master')
          .map((conn) => [`${conn.options.host}:${conn.options.port}`, { conn, get: getOf(conn) }]),
      )
      master = this.#masters.get(nodeKey)
    }
    return master !== undefined && master.conn.status === 'ready' ? master : undefined
  }
}
