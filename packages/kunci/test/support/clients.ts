/**
 * The client libraries kunci supports, behind one small factory, so that one suite
 * (test/integration/clients/) runs unchanged against each: `describe.each(CLIENT_KINDS)`.
 * Each factory returns a client that is ready, as the docs ask users to pass it.
 */
import { Cluster, Redis } from 'ioredis'
import type { KunciClient } from 'kunci'
import { createClient, createCluster } from 'redis'

export interface Endpoint {
  readonly host: string
  readonly port: number
  readonly password?: string | undefined
}

export interface StandaloneOptions {
  /**
   * Queue commands while disconnected (both libraries' default). Off for clients that must
   * fail at once on a dead node instead of waiting for nodeTimeoutMs.
   * @defaultValue true
   */
  offlineQueue?: boolean
}

export interface ClientKind {
  readonly name: 'ioredis' | 'node-redis'
  /** A connected, ready client; `closeAll` closes it. */
  standalone(node: Endpoint, options?: StandaloneOptions): Promise<KunciClient>
  /** A connected cluster client (slot table loaded); `closeAll` closes it. */
  cluster(startupNodes: readonly Endpoint[], password?: string): Promise<KunciClient>
  /** Closes every client this kind made. */
  closeAll(): Promise<void>
}

function ioredisKind(): ClientKind {
  const made: (Redis | Cluster)[] = []
  return {
    name: 'ioredis',
    async standalone(node, options = {}) {
      const c = new Redis({
        host: node.host,
        port: node.port,
        password: node.password,
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(times * 20, 200),
        enableOfflineQueue: options.offlineQueue ?? true,
        lazyConnect: true,
      })
      c.on('error', () => {}) // kills and restarts are on purpose; commands report them
      made.push(c)
      await c.connect()
      return c
    },
    async cluster(startupNodes, password) {
      const c = new Cluster(
        startupNodes.map((n) => ({ host: n.host, port: n.port })),
        { redisOptions: { password } },
      )
      c.on('error', () => {})
      made.push(c)
      await c.ping()
      return c
    },
    async closeAll() {
      for (const c of made.splice(0)) c.disconnect()
    },
  }
}

function nodeRedisKind(): ClientKind {
  const made: { destroy(): void; isOpen: boolean }[] = []
  return {
    name: 'node-redis',
    async standalone(node, options = {}) {
      const c = createClient({
        socket: {
          host: node.host,
          port: node.port,
          reconnectStrategy: (retries) => Math.min(retries * 20, 200),
        },
        password: node.password,
        disableOfflineQueue: options.offlineQueue === false,
      })
      c.on('error', () => {}) // without a listener node-redis would throw on the kills below
      made.push(c)
      await c.connect()
      return c
    },
    async cluster(startupNodes, password) {
      const c = createCluster({
        rootNodes: startupNodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
        defaults: { password },
      })
      c.on('error', () => {})
      made.push(c)
      await c.connect()
      return c
    },
    async closeAll() {
      for (const c of made.splice(0)) if (c.isOpen) c.destroy()
    },
  }
}

/**
 * For `describe.each(CLIENT_KINDS)('$name', ({ make }) => ...)`: each suite calls `make()` for a
 * fresh factory and closes what it made with `closeAll()`.
 */
export const CLIENT_KINDS: readonly { readonly name: ClientKind['name']; readonly make: () => ClientKind }[] =
  [
    { name: 'ioredis', make: ioredisKind },
    { name: 'node-redis', make: nodeRedisKind },
  ]
