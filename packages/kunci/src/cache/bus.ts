/**
 * The invalidation bus: one subscriber connection per cache, on one channel, telling every
 * process which keys changed. It wakes waiters (a loader elsewhere finished) and keeps L1
 * coherent.
 *
 * We own this connection (the only one the cache creates) and manage its life ourselves,
 * because the owner must know the exact moments it is *not* subscribed: messages sent then
 * are lost, so L1 must be flushed and bypassed until the subscription is back. A client's
 * own cluster subscriber silently moves to another node, which hides exactly that.
 *   - standalone: a subscriber to the same server that never reconnects by itself;
 *   - cluster: the same, on one of the cluster's nodes (PUBLISH reaches every node of a
 *     cluster), moving to the next node after each failure.
 * A heartbeat PING catches a connection that hangs without closing (paused node, partition).
 *
 * Message: one type letter, the sender's 12-character id, then the key or key prefix.
 */
import { randomBytes } from 'node:crypto'
import type { RedisPort, Subscriber } from '../redis/port.js'

export type BusMessageType = 'k' | 'p' | 'w' // key changed | every key under a prefix changed | wake only

export interface BusHandlers {
  message(type: BusMessageType, sender: string, subject: string): void
  /** `up` after (re)subscribing; `down` when messages may have been missed. */
  state(up: boolean, reason: string, error?: Error): void
}

const ID_LENGTH = 12

export function newInstanceId(): string {
  return randomBytes(9).toString('base64url') // 12 characters
}

export function busMessage(type: BusMessageType, sender: string, subject: string): string {
  return type + sender + subject
}

export class Bus {
  readonly #client: RedisPort
  readonly #channel: string
  readonly #heartbeatMs: number
  readonly #handlers: BusHandlers
  #conn: Subscriber | undefined
  #up = false
  #closed = false
  #attempt = 0
  #nodeIndex = 0
  #retryTimer: NodeJS.Timeout | undefined
  #heartbeat: NodeJS.Timeout | undefined

  readonly #name: string

  constructor(client: RedisPort, channel: string, heartbeatMs: number, name: string, handlers: BusHandlers) {
    this.#client = client
    this.#name = name
    this.#channel = channel
    this.#heartbeatMs = heartbeatMs
    this.#handlers = handlers
  }

  /** Subscribed now: every message published from here on reaches us. */
  get up(): boolean {
    return this.#up
  }

  start(): void {
    this.#connect()
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#retryTimer)
    clearInterval(this.#heartbeat)
    const conn = this.#conn
    this.#conn = undefined
    this.#up = false
    if (conn) await conn.close()
  }

  #connect(): void {
    if (this.#closed) return
    let conn: Subscriber | undefined
    try {
      conn = this.#open()
    } catch {
      // A cluster node whose connection the client has not opened yet: try the next one.
      conn = undefined
    }
    if (conn === undefined) {
      this.#retry('no node known yet')
      return
    }
    this.#conn = conn
    conn.onMessage((_channel, data) => {
      if (conn !== this.#conn) return
      const text = data.toString('utf8')
      const type = text[0]
      if (type !== 'k' && type !== 'p' && type !== 'w') return
      this.#handlers.message(type, text.slice(1, 1 + ID_LENGTH), text.slice(1 + ID_LENGTH))
    })
    conn.onClose(() => this.#lost(conn, 'connection closed'))
    conn
      .connect()
      .then(() => conn.subscribe([this.#channel]))
      .then(
        () => {
          if (conn !== this.#conn || this.#closed) return
          this.#attempt = 0
          this.#up = true
          this.#startHeartbeat(conn)
          this.#handlers.state(true, 'subscribed')
        },
        (err: Error) => this.#lost(conn, 'subscribe failed', err),
      )
  }

  #open(): Subscriber | undefined {
    const options = {
      reconnect: false, // we reconnect ourselves, so a drop is always seen
      lazy: true,
      connectTimeoutMs: Math.max(1000, this.#heartbeatMs),
      name: this.#name, // CLIENT LIST shows which cache instance a subscriber belongs to
    }
    const cluster = this.#client.cluster
    if (cluster === undefined) return this.#client.subscriber(options)
    const nodes = cluster.nodes()
    if (nodes.length === 0) return undefined
    // The node's own connection settings (address, credentials, TLS) with ours on top.
    return nodes[this.#nodeIndex++ % nodes.length]!.subscriber(options)
  }

  #startHeartbeat(conn: Subscriber): void {
    clearInterval(this.#heartbeat)
    let outstanding = false
    this.#heartbeat = setInterval(() => {
      if (conn !== this.#conn) return
      // The reply may be sitting unread: when this process ran without yielding to I/O for a
      // whole period (a burst of L1 hits resolves in microtasks alone), the timer can fire again
      // before the poll phase. So judge after that phase (setImmediate), not before it.
      if (outstanding) {
        setImmediate(() => {
          if (outstanding && conn === this.#conn) this.#lost(conn, 'heartbeat timed out')
        })
        return
      }
      outstanding = true
      conn.ping().then(
        () => {
          outstanding = false
        },
        (err: Error) => this.#lost(conn, 'heartbeat failed', err),
      )
    }, this.#heartbeatMs)
    this.#heartbeat.unref()
  }

  #lost(conn: Subscriber, reason: string, error?: Error): void {
    if (conn !== this.#conn) return
    this.#conn = undefined
    clearInterval(this.#heartbeat)
    conn.onMessage(undefined)
    conn.destroy()
    this.#up = false
    if (this.#closed) return
    this.#handlers.state(false, reason, error)
    this.#retry(reason)
  }

  #retry(_reason: string): void {
    if (this.#closed) return
    const delay = Math.min(50 * 2 ** this.#attempt++, 2000)
    this.#retryTimer = setTimeout(() => this.#connect(), delay)
    this.#retryTimer.unref()
  }
}
