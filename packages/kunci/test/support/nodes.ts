import { type NodeSet, type StartNodesOptions, startNodes } from '@kunci/topology'
import { Redis, type RedisOptions } from 'ioredis'

/** Clients as a user would configure them for Redlock: fail fast instead of queueing forever. */
export const CLIENT_OPTIONS: RedisOptions = {
  maxRetriesPerRequest: 1,
  retryStrategy: (times) => Math.min(times * 20, 200),
  enableOfflineQueue: true,
  lazyConnect: false,
}

export interface Fixture {
  readonly set: NodeSet
  /** A fresh set of clients (one "pod"); all of them are disconnected by stop(). */
  clients(options?: RedisOptions): Redis[]
  stop(): Promise<void>
}

export async function startFixture(options: StartNodesOptions): Promise<Fixture> {
  const set = await startNodes(options)
  const made: Redis[] = []
  return {
    set,
    clients(extra) {
      const cs = set.nodes.map(
        (n) => new Redis({ host: n.host, port: n.port, password: n.password, ...CLIENT_OPTIONS, ...extra }),
      )
      // Faults make sockets fail on purpose; commands report it, the event would only be noise.
      for (const c of cs) c.on('error', () => {})
      made.push(...cs)
      return cs
    },
    async stop() {
      for (const c of made) c.disconnect()
      await set.stop()
    },
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Waits until every client is ready, so a test's first acquire does not race connection set-up. */
export async function ready(clients: Redis[]): Promise<void> {
  await Promise.all(
    clients.map((c) => (c.status === 'ready' ? undefined : new Promise((r) => c.once('ready', r)))),
  )
}

/** Counts calls of every command on a node since the last CONFIG RESETSTAT. */
export async function commandStats(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats')
  const out = new Map<string, number>()
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]))
  return out
}

/** The one polling helper of the tests (@kunci/topology): `until(check, what, timeoutMs?)`, `eventually(assertion)`. */
export { eventually, until } from '@kunci/topology'

/** How many of `clients` have at least `n` members in the wait queue `queueKey`. */
export async function queuedOn(
  clients: readonly { zcard(key: string): Promise<number> }[],
  queueKey: string,
  n = 1,
): Promise<number> {
  const sizes = await Promise.all(clients.map((c) => c.zcard(queueKey).catch(() => 0)))
  return sizes.filter((s) => s >= n).length
}
