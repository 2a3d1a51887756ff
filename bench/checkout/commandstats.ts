// Redis commands per request: `INFO commandstats` of every node of a stack's cluster, read at the
// start and at the end of a run's measured window, summed over the masters and, apart, over the
// replicas (which count the commands replicated to them). The bench's own INFO calls are left out.
//
// The nodes are reached on their redis-server port (not through a fault proxy), as the stack's
// admin ACL user: the app's user may not run INFO on every section.
import { Redis } from 'ioredis'

export interface RedisAccess {
  username: string
  password: string
  nodes: { host: string; port: number }[]
}

/** Calls per command, summed over one role's nodes. */
export type CommandCounts = Record<string, number>

export interface CommandSnapshot {
  masters: CommandCounts
  replicas: CommandCounts
  /** Every node answered. A snapshot with a node missing gives no delta: a zero would be a lie. */
  complete: boolean
}

export interface CommandDelta {
  masters: CommandCounts
  replicas: CommandCounts
  mastersTotal: number
  replicasTotal: number
}

/** `cmdstat_evalsha:calls=12,usec=…` lines → { evalsha: 12 }. */
export function parseCommandStats(info: string): CommandCounts {
  const out: CommandCounts = {}
  for (const line of info.split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (m) out[m[1]!] = Number(m[2])
  }
  return out
}

function add(into: CommandCounts, from: CommandCounts): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v
}

function minus(end: CommandCounts, start: CommandCounts): CommandCounts {
  const out: CommandCounts = {}
  for (const [k, v] of Object.entries(end)) {
    // The bench's own reads (INFO) are not the service's work.
    if (k === 'info') continue
    const d = v - (start[k] ?? 0)
    if (d > 0) out[k] = d
  }
  return out
}

const total = (c: CommandCounts) => Object.values(c).reduce((a, b) => a + b, 0)

export class CommandCounter {
  readonly #clients: Redis[]

  constructor(access: RedisAccess) {
    this.#clients = access.nodes.map(
      (n) =>
        new Redis({
          host: n.host,
          port: n.port,
          username: access.username,
          password: access.password,
          lazyConnect: true,
          maxRetriesPerRequest: 1,
          enableOfflineQueue: true,
        }),
    )
  }

  /** One snapshot of every node; a node's role is read with it (a failover would move it). */
  async snapshot(): Promise<CommandSnapshot> {
    const snap: CommandSnapshot = { masters: {}, replicas: {}, complete: true }
    const infos = await Promise.all(
      this.#clients.map((c) =>
        (c.call('INFO', 'replication', 'commandstats') as Promise<string>).catch((err: Error) => {
          process.stderr.write(`INFO commandstats failed: ${err.message}\n`)
          snap.complete = false
          return undefined
        }),
      ),
    )
    for (const info of infos) {
      if (info === undefined) continue
      const replica = /role:slave/.test(info)
      add(replica ? snap.replicas : snap.masters, parseCommandStats(info))
    }
    return snap
  }

  /** What the service ran between two snapshots; undefined if either missed a node. */
  static delta(start: CommandSnapshot, end: CommandSnapshot): CommandDelta | undefined {
    if (!start.complete || !end.complete) return undefined
    const masters = minus(end.masters, start.masters)
    const replicas = minus(end.replicas, start.replicas)
    return { masters, replicas, mastersTotal: total(masters), replicasTotal: total(replicas) }
  }

  async close(): Promise<void> {
    await Promise.all(this.#clients.map((c) => c.quit().catch(() => c.disconnect())))
  }
}
