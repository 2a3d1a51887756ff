import type { Cluster, Redis } from 'ioredis'
import type { Subscriber, SubscriberOptions } from '../port.js'

/** ioredis `duplicate()` options for a subscriber kunci owns. */
export function subscriberOptions(o: SubscriberOptions): Record<string, unknown> {
  // The user's clients may disable the offline queue (recommended for lock nodes); our
  // subscriber must not: a SUBSCRIBE made while it connects would fail silently.
  if (o.reconnect) return { enableOfflineQueue: true, lazyConnect: o.lazy === true }
  return {
    lazyConnect: o.lazy === true,
    autoResubscribe: false,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null, // the owner reconnects itself, so a drop is always seen
    ...(o.connectTimeoutMs === undefined ? {} : { connectTimeout: o.connectTimeoutMs }),
    ...(o.name === undefined ? {} : { connectionName: o.name }),
  }
}

/** A subscriber connection (a duplicated `Redis`, or a duplicated `Cluster`) behind the port. */
export class IoredisSubscriber implements Subscriber {
  readonly #conn: Redis | Cluster
  #connecting: Promise<void> | undefined
  #onMessage: ((channel: string, message: Buffer) => void) | undefined

  constructor(conn: Redis | Cluster, lazy: boolean) {
    this.#conn = conn
    conn.on('error', () => {}) // surfaced through failed commands and 'close'
    conn.on('messageBuffer', (channel: Buffer, message: Buffer) =>
      this.#onMessage?.(channel.toString(), message),
    )
    if (!lazy) this.#connecting = Promise.resolve()
  }

  connect(): Promise<void> {
    this.#connecting ??= this.#conn.connect()
    return this.#connecting
  }

  async subscribe(channels: readonly string[]): Promise<void> {
    await this.#conn.subscribe(...channels)
  }

  async unsubscribe(channels: readonly string[]): Promise<void> {
    await this.#conn.unsubscribe(...channels)
  }

  async ping(): Promise<void> {
    await this.#conn.ping()
  }

  onMessage(listener: ((channel: string, message: Buffer) => void) | undefined): void {
    this.#onMessage = listener
  }

  onClose(listener: () => void): void {
    this.#conn.once('close', listener)
  }

  async close(): Promise<void> {
    try {
      await this.#conn.quit()
    } catch {
      this.#conn.disconnect()
    }
  }

  destroy(): void {
    this.#conn.disconnect()
  }
}
