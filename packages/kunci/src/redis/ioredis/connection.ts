import type { Redis } from 'ioredis'
import type { Arg, Connection, ConnectionOptions } from '../port.js'

/**
 * ioredis `duplicate()` options for a plain command connection kunci owns (port.ts `Connection`):
 * the user's settings (host, auth, TLS) minus everything that would queue, retry or re-send a
 * command behind kunci's back.
 */
export function connectionOptions(o: ConnectionOptions): Record<string, unknown> {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    autoResendUnfulfilledCommands: false,
    autoResubscribe: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null, // a drop is final: the owner opens a new connection
    keyPrefix: '', // keys are sent as given
    readOnly: false,
    connectTimeout: o.connectTimeoutMs,
    ...(o.name === undefined ? {} : { connectionName: o.name }),
  }
}

/** A duplicated `Redis` behind the port's `Connection`. */
export class IoredisConnection implements Connection {
  readonly #conn: Redis
  #connecting: Promise<void> | undefined
  #destroyed = false

  constructor(conn: Redis) {
    this.#conn = conn
    conn.on('error', () => {}) // surfaced through failed commands and `closed`
  }

  get closed(): boolean {
    return this.#destroyed || this.#conn.status === 'end'
  }

  connect(): Promise<void> {
    this.#connecting ??= this.#conn.connect()
    return this.#connecting
  }

  send(command: string, args: readonly Arg[]): Promise<unknown> {
    return this.#conn.call(command, ...args)
  }

  async close(): Promise<void> {
    this.#destroyed = true
    if (this.#conn.status === 'end') return
    if (this.#connecting === undefined) {
      // Never connected: a QUIT would connect it first.
      this.#conn.disconnect()
      return
    }
    try {
      await this.#conn.quit()
    } catch {
      this.#conn.disconnect()
    }
  }

  destroy(): void {
    this.#destroyed = true
    this.#conn.disconnect()
  }
}
