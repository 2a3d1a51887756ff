import { once } from 'node:events'
import type { RedisNode } from '@kunci/topology'
import { Redis, type RedisOptions } from 'ioredis'
import { Redlock, type RedlockOptions } from 'kunci'

/** Settings every lock manager of the demo shares: short TTLs so the restart quarantine is short too. */
export const LOCK_SETTINGS = Object.freeze({
  ttlMs: 500,
  /** Quarantine length of a restarted node; every ttlMs in use must stay below it. */
  maxTtlMs: 2_000,
  nodeTimeoutMs: 200,
  /** The nodes run appendfsync everysec; say so, or every pod warns about each node. */
  persistence: 'everysec' as const,
})

/**
 * One simulated service replica: its own Redlock and its own connection per lock node, as
 * separate processes would have. Pods share only the Redis nodes.
 */
export interface Pod {
  readonly name: string
  readonly redlock: Redlock
  /** Index i talks to node i. */
  readonly clients: readonly Redis[]
  close(): Promise<void>
}

export interface PodOptions {
  /** Overrides of the lock manager options, e.g. `quarantine: false` for the unsafe contrast. */
  readonly lock?: Partial<Omit<RedlockOptions, 'clients'>>
  /** Per-node client address overrides (index → port), e.g. a proxy that cuts this pod off. */
  readonly portOverride?: ReadonlyMap<number, number>
  /** Per-node ioredis overrides. */
  readonly client?: RedisOptions
}

export function clientFor(host: string, port: number, extra: RedisOptions = {}): Redis {
  const client = new Redis({
    host,
    port,
    // Nodes come back within a second or two in the demo: reconnect quickly instead of backing off to 2 s.
    retryStrategy: (times) => Math.min(times * 20, 200),
    ...extra,
  })
  // Connection errors surface as failed votes; without a listener ioredis would log each one.
  client.on('error', () => {})
  return client
}

export function createPod(name: string, nodes: readonly RedisNode[], options: PodOptions = {}): Pod {
  const clients: Redis[] = nodes.map((n, i) =>
    clientFor(n.host, options.portOverride?.get(i) ?? n.port, options.client),
  )
  const redlock = new Redlock({
    clients,
    maxTtlMs: LOCK_SETTINGS.maxTtlMs,
    ttlMs: LOCK_SETTINGS.ttlMs,
    nodeTimeoutMs: LOCK_SETTINGS.nodeTimeoutMs,
    persistence: LOCK_SETTINGS.persistence,
    ...options.lock,
  })
  return {
    name,
    redlock,
    clients,
    async close() {
      await redlock.close()
      // We created these clients, so we close them; disconnect() because a paused node never answers QUIT.
      for (const c of clients) c.disconnect()
    },
  }
}

/** Resolves once every client in `clients` is connected and past its ready check. */
export function whenReady(clients: readonly Redis[]): Promise<unknown> {
  return Promise.all(clients.map((c) => (c.status === 'ready' ? undefined : once(c, 'ready'))))
}
