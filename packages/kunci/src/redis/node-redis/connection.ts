import type { Arg, Connection, ConnectionOptions } from '../port.js'
import { commandArgs, type Events, type NodeRedisClient, STRING_REPLIES } from './types.js'

/** A node-redis client duplicated for a plain connection: the members the connection uses. */
export type NodeRedisConnClient = NodeRedisClient &
  Events & {
    destroy(): unknown
    close?(): Promise<unknown>
  }

/**
 * node-redis `duplicate()` overrides for a plain command connection kunci owns (port.ts
 * `Connection`): the user's settings (socket, auth, TLS) with no reconnection and no offline
 * queue, so a drop is final and seen.
 */
export function connectionOverrides(base: object, o: ConnectionOptions): object {
  const socket = { ...((base as { options?: { socket?: object } }).options?.socket ?? {}) } as Record<
    string,
    unknown
  >
  socket.reconnectStrategy = false
  socket.connectTimeout = o.connectTimeoutMs
  return {
    socket,
    disableOfflineQueue: true,
    ...(o.name === undefined ? {} : { name: o.name }),
  }
}

/**
 * A plain connection made by `open` (a `duplicate()` of the user's client or of a cluster node's
 * client, not connected yet). Its errors are caught here (node-redis throws an `error` event
 * nobody listens to); they surface as failed commands and `closed`.
 */
export class NodeRedisConnection implements Connection {
  readonly #open: () => Promise<NodeRedisConnClient>
  #client: NodeRedisConnClient | undefined
  #connecting: Promise<void> | undefined
  #connected = false
  #destroyed = false

  constructor(open: () => Promise<NodeRedisConnClient>) {
    this.#open = open
  }

  get closed(): boolean {
    return this.#destroyed || (this.#connected && this.#client?.isOpen !== true)
  }

  connect(): Promise<void> {
    this.#connecting ??= this.#connect()
    return this.#connecting
  }

  async #connect(): Promise<void> {
    try {
      const c = await this.#open()
      c.on('error', () => {})
      this.#client = c
      if (this.#destroyed) throw new Error('connection closed before it was open')
      await c.connect()
      this.#connected = true
      if (this.#destroyed) this.#drop()
    } catch (err) {
      this.#destroyed = true
      this.#drop()
      throw err
    }
  }

  send(command: string, args: readonly Arg[]): Promise<unknown> {
    const c = this.#client
    if (!this.#connected || c === undefined) return Promise.reject(new Error('not connected'))
    return c.sendCommand(commandArgs(command, args), STRING_REPLIES)
  }

  async close(): Promise<void> {
    this.#destroyed = true
    const c = this.#client
    if (!this.#connected || c === undefined || !c.isOpen) {
      this.#drop()
      return
    }
    try {
      if (c.close) await c.close()
      else this.#drop()
    } catch {
      this.#drop()
    }
  }

  destroy(): void {
    this.#destroyed = true
    this.#drop()
  }

  #drop(): void {
    // node-redis throws when the client is closed already (e.g. its connection failed).
    try {
      if (this.#client?.isOpen) this.#client.destroy()
    } catch {}
  }
}
