/**
 * The GET of a cache hit on ioredis: the GETs one tick sends on a connection leave in one socket
 * write (`cork` now, `uncork` once the tick's callers have run), around ioredis' auto-pipeline
 * when the client has it on.
 *
 * Why: profiled with 64 callers (bench/cache/RESULTS.md, "Issue 9"), ioredis' auto-pipeline
 * costs ≈8.7 µs of client CPU per GET on one node and ≈12 µs on a Cluster (a Pipeline per node
 * and tick, a promise and a nextTick per command, one pipeline in flight per node, and on a
 * Cluster three slot computations per command), against ≈5 µs for a corked direct write.
 * Batching the GETs into one script call is not possible on a Cluster: every entry has its own
 * slot (cache-keys.ts), and a Cluster script may only touch keys of one slot.
 *
 * On a Cluster the GET goes straight to the connection of the master that owns the key's slot.
 * Nothing is weaker than `cluster.get()`: only masters are asked (a replica or a former master
 * answers MOVED, never a value), and any error at all (MOVED or ASK during a resharding, a
 * closed connection during a failover, LOADING, ...) sends the GET again through
 * `cluster.get()`, which follows redirections, refreshes the slot table and retries as the user
 * configured it. When the slot table or the master's connection is not known yet, the hit is a
 * plain `cluster.get()`. A client whose Command class is unknown (command.ts) keeps `get()`.
 *
 * Not ordered after a write that was not awaited: the GET may reach the node before a script
 * call that ioredis still holds in its auto-pipeline. An awaited write always comes first.
 */
import type { Cluster, Redis } from 'ioredis'
import { keySlot } from '../../cluster/slot.js'
import { commandSender } from './command.js'

export type ReadValue = (key: string) => Promise<string | null>

interface Stream {
  cork(): void
  uncork(): void
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

/** A connection's GET, around its auto-pipeline if it has one, or its own `get`. */
function getOf(conn: Redis): ReadValue {
  const send = conn.options.enableAutoPipelining ? commandSender(conn) : undefined
  if (send === undefined) return (key) => conn.get(key)
  return (key) => send('get', [key], false) as Promise<string | null>
}

/** The hit's GET on one standalone connection. */
export function standaloneReader(conn: Redis): ReadValue {
  // Only a client whose Command class is known (any ioredis copy, command.ts).
  if (commandSender(conn) === undefined) return (key) => conn.get(key)
  const corker = new TickCorker()
  const get = getOf(conn)
  return (key) => {
    corker.cork(conn.stream as Stream | undefined)
    return get(key)
  }
}

interface Master {
  readonly conn: Redis
  readonly get: ReadValue
}

/** The hit's GET on a Cluster: straight to the owning master, corked per tick. */
export function clusterReader(cluster: Cluster): ReadValue {
  // A key prefix is applied by the client that builds the command: the node connections and
  // the Cluster could disagree, so such clients keep ioredis' own path.
  if (
    commandSender(cluster) === undefined ||
    !Array.isArray(cluster.slots) ||
    cluster.options?.keyPrefix ||
    cluster.options?.redisOptions?.keyPrefix
  ) {
    return (key) => cluster.get(key)
  }
  const corker = new TickCorker()
  /** Master connections by node key ("host:port", as in `cluster.slots`). */
  let masters = new Map<string, Master>()
  const masterOf = (nodeKey: string | undefined): Master | undefined => {
    if (nodeKey === undefined) return undefined
    let master = masters.get(nodeKey)
    if (master === undefined || master.conn.status === 'end') {
      // A new master (failover, resharding) or a dropped connection: look again.
      masters = new Map(
        cluster
          .nodes('master')
          .map((conn) => [`${conn.options.host}:${conn.options.port}`, { conn, get: getOf(conn) }]),
      )
      master = masters.get(nodeKey)
    }
    return master !== undefined && master.conn.status === 'ready' ? master : undefined
  }
  return (key) => {
    const master = cluster.status === 'ready' ? masterOf(cluster.slots[keySlot(key)]?.[0]) : undefined
    if (master === undefined) return cluster.get(key)
    corker.cork(master.conn.stream as Stream | undefined)
    return master.get(key).catch(() => cluster.get(key))
  }
}
