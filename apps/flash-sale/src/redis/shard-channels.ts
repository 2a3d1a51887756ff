import type { Redis } from 'ioredis'
import { keySlot } from 'kunci'

/**
 * Sharded Pub/Sub (SSUBSCRIBE, Redis 7) over one connection per node, each channel placed on
 * the node that serves its slot now, as the caller's routing says (the sale client's slot table,
 * refreshed every second).
 *
 * Why not ioredis' own `shardedSubscribers`: a master that loses a slot (a failover, the heal of
 * a partition that demotes it, a migration) pushes SUNSUBSCRIBE for the slot's channels without
 * being asked. ioredis reads a reply with no command behind it as "Command queue state error"
 * and emits 'error' on that connection; its subscriber group removes every listener from a
 * connection it stops using while the socket may still deliver, and a push arriving then is an
 * unhandled 'error' that ends the process. partition-crowd caught it: the solo instance died
 * 1.8 s after the heal of fault c (ioredis 5.9.2). Here a connection keeps its error listener for
 * its whole life, and a connection whose replies no longer line up with its commands is retired
 * whole (a fresh one has a clean queue), its channels subscribed again where their slots are.
 *
 * A notification published while a channel is between nodes is lost; the sales' per-second
 * epoch check (sale/sale-snapshots.ts) is what catches that, not this class.
 */
export interface ShardChannelsOptions {
  /** The node ("host:port", or any stable name) serving a slot now; undefined while unknown. */
  route(slot: number): string | undefined
  /**
   * A connection of its own to that node, used for SSUBSCRIBE / SUNSUBSCRIBE only. It should not
   * reconnect by itself (`retryStrategy: null`): a closed connection is replaced by the next check,
   * at the node the routing names then.
   */
  connect(node: string): Redis
  onMessage(channel: string, message: string): void
  /** How often the placements are compared with the routing. @defaultValue 1000 */
  checkIntervalMs?: number
}

/** ioredis' words for a reply that no command was waiting for (a push such as SUNSUBSCRIBE). */
const OUT_OF_STEP = /Command queue state error/

export class ShardChannels {
  readonly #options: ShardChannelsOptions
  /** channel → its slot */
  readonly #wanted = new Map<string, number>()
  /** channel → the node it is subscribed on (confirmed) or being subscribed on (in flight) */
  readonly #placed = new Map<string, { node: string; confirmed: boolean }>()
  readonly #connections = new Map<string, Redis>()
  readonly #timer: NodeJS.Timeout
  #outOfStep = 0
  #syncQueued = false
  #closed = false

  constructor(options: ShardChannelsOptions) {
    this.#options = options
    this.#timer = setInterval(() => this.#sync(), options.checkIntervalMs ?? 1_000)
    this.#timer.unref()
  }

  /** Subscribes to channel from now on, wherever its slot goes (once; later calls do nothing). */
  subscribe(channel: string): void {
    if (this.#closed || this.#wanted.has(channel)) return
    this.#wanted.set(channel, keySlot(channel))
    this.#queueSync()
  }

  /**
   * For tests and metrics: channels asked for, confirmed subscribed, open connections, and
   * connections retired because a reply came that no command was waiting for (a node dropping
   * its subscribers when it lost a slot).
   */
  stats(): { wanted: number; subscribed: number; connections: number; outOfStep: number } {
    let subscribed = 0
    for (const p of this.#placed.values()) if (p.confirmed) subscribed++
    return {
      wanted: this.#wanted.size,
      subscribed,
      connections: this.#connections.size,
      outOfStep: this.#outOfStep,
    }
  }

  close(): void {
    this.#closed = true
    clearInterval(this.#timer)
    for (const conn of this.#connections.values()) conn.disconnect()
    this.#connections.clear()
    this.#placed.clear()
  }

  #queueSync(): void {
    if (this.#syncQueued) return
    this.#syncQueued = true
    setImmediate(() => {
      this.#syncQueued = false
      this.#sync()
    })
  }

  /** Puts every channel on the node that serves its slot now; closes connections left idle. */
  #sync(): void {
    if (this.#closed) return
    for (const [channel, slot] of this.#wanted) {
      const node = this.#options.route(slot)
      const at = this.#placed.get(channel)
      if (node === undefined || at?.node === node) continue
      if (at !== undefined) {
        // An answer still to come from the old node is ignored (the placement is no longer its),
        // and a connection that ends up serving nothing is closed below.
        this.#placed.delete(channel)
        if (at.confirmed) {
          this.#connections
            .get(at.node)
            ?.sunsubscribe(channel)
            .catch(() => {})
        }
      }
      const placement = { node, confirmed: false }
      this.#placed.set(channel, placement)
      this.#connection(node)
        .ssubscribe(channel)
        .then(
          () => {
            if (this.#placed.get(channel) === placement) placement.confirmed = true
          },
          // MOVED (the routing was behind), or the connection closed: the next check tries again.
          () => {
            if (this.#placed.get(channel) === placement) this.#placed.delete(channel)
          },
        )
    }
    const used = new Set([...this.#placed.values()].map((p) => p.node))
    for (const node of this.#connections.keys()) if (!used.has(node)) this.#retire(node)
  }

  #connection(node: string): Redis {
    const existing = this.#connections.get(node)
    if (existing !== undefined) return existing
    const conn = this.#options.connect(node)
    // Never removed: a connection being closed may still deliver a reply, and an 'error' without a
    // listener ends the process.
    conn.on('error', (err: Error) => {
      if (OUT_OF_STEP.test(err.message) && this.#connections.get(node) === conn) {
        this.#outOfStep++
        this.#retire(node)
      }
    })
    conn.on('smessage', (channel: string, message: string) => {
      if (this.#connections.get(node) === conn) this.#options.onMessage(channel, message)
    })
    conn.once('end', () => {
      if (this.#connections.get(node) === conn) this.#retire(node)
    })
    this.#connections.set(node, conn)
    return conn
  }

  /**
   * Forgets the node's connection and what was placed on it; the next periodic check places it
   * again (not at once: a node that refuses connections would be dialled in a loop).
   */
  #retire(node: string): void {
    const conn = this.#connections.get(node)
    this.#connections.delete(node)
    for (const [channel, p] of this.#placed) if (p.node === node) this.#placed.delete(channel)
    conn?.disconnect()
  }
}
