import type { Subscriber, SubscriberOptions } from '../port.js'
import type { NodeRedisPubSub } from './types.js'

/** node-redis `duplicate()` overrides for a subscriber kunci owns. */
export function subscriberOverrides(base: object, o: SubscriberOptions): object {
  const socket = { ...((base as { options?: { socket?: object } }).options?.socket ?? {}) } as Record<
    string,
    unknown
  >
  const out: Record<string, unknown> = { disableOfflineQueue: false }
  // The owner reconnects itself, so that a drop is always seen.
  if (!o.reconnect) socket.reconnectStrategy = false
  if (o.connectTimeoutMs !== undefined) socket.connectTimeout = o.connectTimeoutMs
  if (o.name !== undefined) out.name = o.name
  out.socket = socket
  return out
}

/**
 * A subscriber connection kunci created with `duplicate()`. Its errors are caught here
 * (node-redis throws an `error` event nobody listens to); they surface as `onClose` and failed
 * commands, as the owners of subscribers expect.
 */
export class NodeRedisSubscriber implements Subscriber {
  readonly #c: NodeRedisPubSub
  readonly #ping: () => Promise<unknown>
  #connecting: Promise<void> | undefined
  #closedEmitted = false
  #onClose: (() => void)[] = []
  #onMessage: ((channel: string, message: Buffer) => void) | undefined

  constructor(client: NodeRedisPubSub, lazy: boolean, ping: () => Promise<unknown>) {
    this.#c = client
    this.#ping = ping
    client.on('error', () => {
      // Without reconnection node-redis reports a dropped socket only as an error.
      if (client.isReady === false) this.#closed()
    })
    client.on('reconnecting', () => this.#closed())
    client.on('end', () => this.#closed())
    client.on('ready', () => {
      this.#closedEmitted = false
    })
    if (!lazy) this.connect().catch(() => {})
  }

  connect(): Promise<void> {
    this.#connecting ??= this.#c.connect().then(() => undefined)
    return this.#connecting
  }

  async subscribe(channels: readonly string[]): Promise<void> {
    await this.#c.subscribe([...channels], this.#message, true)
  }

  async unsubscribe(channels: readonly string[]): Promise<void> {
    await this.#c.unsubscribe([...channels], this.#message, true)
  }

  async ping(): Promise<void> {
    await this.#ping()
  }

  onMessage(listener: ((channel: string, message: Buffer) => void) | undefined): void {
    this.#onMessage = listener
  }

  onClose(listener: () => void): void {
    this.#onClose.push(listener)
  }

  async close(): Promise<void> {
    if (!this.#c.isOpen) return
    try {
      if (this.#c.close) await this.#c.close()
      else this.destroy()
    } catch {
      this.destroy()
    }
  }

  destroy(): void {
    // node-redis throws when the client is closed already (e.g. it gave up reconnecting).
    try {
      if (this.#c.isOpen) this.#c.destroy()
    } catch {}
  }

  #closed(): void {
    if (this.#closedEmitted) return
    this.#closedEmitted = true
    for (const l of this.#onClose.splice(0)) l()
  }

  #message = (message: Buffer, channel: Buffer): void => {
    this.#onMessage?.(channel.toString(), message)
  }
}
