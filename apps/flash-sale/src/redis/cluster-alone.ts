import type { Redis } from 'ioredis'

/**
 * Is a master really alone, that is: is there no replica that a failover could promote without
 * the writes this master took? Decided from the Cluster's own view, never from a WAIT that got 0
 * acknowledgements (STYLE.md §13, issue 20).
 *
 * Why a WAIT is not enough: a master cut off from its replica (a partition) answers WAIT exactly
 * like a master whose replica is gone. The first is about to be deposed: once the majority marks
 * it failed, the replica is promoted without the writes it took meanwhile, so whatever SQL
 * recorded from them (orders, returned units) describes a Redis that no longer exists. The second
 * (a promoted master whose old master is dead, or a master whose replica died) is the only copy
 * there is, and nothing can be promoted in its place.
 *
 * The rule: a master is alone when
 * 1. its own `CLUSTER NODES` says it is a master serving the slot, the cluster state is `ok`, and
 *    each of its replicas is flagged `fail` (agreed by the majority), none merely `fail?`; and
 * 2. a majority of the masters that serve slots (itself included) say the same when asked in
 *    turn: the node is a master without `fail`/`fail?` and each of its replicas is `fail`.
 *
 * A replica flagged `fail` by the majority is unreachable from the majority, so it cannot win a
 * failover election; to become promotable again it must reconnect and resync from this master,
 * which gives it these writes. A master isolated from the majority fails check 2 (the others see
 * it `fail?`, then `fail`), and while the majority still sees it healthy its replica is healthy
 * too in their view (only the master–replica link is cut): check 1 fails. The residual case is a
 * double fault: the replica failed, then the master is cut off; nothing can be promoted then
 * either (the slot goes down until the master returns), so nothing is lost.
 */
export interface AloneCheck {
  /** Resolves true only when both checks above pass; false on any doubt (timeouts, errors). */
  isAlone(node: string, slot: number, conn: Redis): Promise<boolean>
  close(): void
}

/** One line of CLUSTER NODES. */
export interface ClusterNodeLine {
  id: string
  /** `ip:port` as the node announces it. */
  address: string
  flags: Set<string>
  /** The master's id for a replica, '-' for a master. */
  masterId: string
  /** Slot ranges served, inclusive. */
  slots: [number, number][]
}

/** Parses CLUSTER NODES (Redis ≥ 7: `ip:port@cport[,hostname]`; slot ranges, `[…]` migrations skipped). */
export function parseClusterNodes(text: string): ClusterNodeLine[] {
  const out: ClusterNodeLine[] = []
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ')
    if (parts.length < 8) continue
    const [id, addr, flags, masterId] = parts as [string, string, string, string]
    const slots: [number, number][] = []
    for (const s of parts.slice(8)) {
      if (s.startsWith('[')) continue
      const dash = s.indexOf('-')
      const from = Number(dash < 0 ? s : s.slice(0, dash))
      const to = Number(dash < 0 ? s : s.slice(dash + 1))
      if (Number.isInteger(from) && Number.isInteger(to)) slots.push([from, to])
    }
    out.push({
      id,
      address: addr.split('@')[0] ?? addr,
      flags: new Set(flags.split(',')),
      masterId,
      slots,
    })
  }
  return out
}

const serves = (n: ClusterNodeLine, slot: number) => n.slots.some(([a, b]) => slot >= a && slot <= b)
const failing = (n: ClusterNodeLine) => n.flags.has('fail') || n.flags.has('fail?')

/**
 * In one node's view: is `masterId` a healthy master (serving `slot` when given) whose every
 * replica is flagged `fail`? The verdict one asked node gives.
 */
export function seesAlone(view: readonly ClusterNodeLine[], masterId: string, slot?: number): boolean {
  const master = view.find((n) => n.id === masterId)
  if (master === undefined || !master.flags.has('master') || failing(master)) return false
  if (slot !== undefined && !serves(master, slot)) return false
  return view.filter((n) => n.masterId === masterId).every((r) => r.flags.has('fail'))
}

export interface ClusterAloneOptions {
  /** A new connection to another node (`host:port`), used only for CLUSTER NODES. */
  connect(node: string): Redis
  /** How long one node's view may take. @defaultValue 500 */
  timeoutMs?: number
}

/** The AloneCheck of a Redis Cluster (the rule in this file's header). */
export class ClusterAlone implements AloneCheck {
  readonly #connect: (node: string) => Redis
  readonly #timeoutMs: number
  /** Connections to the other masters, kept between checks (a check comes at most once a second per master). */
  readonly #peers = new Map<string, Redis>()

  constructor(options: ClusterAloneOptions) {
    this.#connect = options.connect
    this.#timeoutMs = options.timeoutMs ?? 500
  }

  async isAlone(_node: string, slot: number, conn: Redis): Promise<boolean> {
    try {
      const [ownText, info] = await this.#bounded(
        Promise.all([conn.call('CLUSTER', 'NODES'), conn.call('CLUSTER', 'INFO')]),
      )
      if (!/cluster_state:ok/.test(String(info))) return false
      const own = parseClusterNodes(String(ownText))
      const me = own.find((n) => n.flags.has('myself'))
      if (me === undefined || !seesAlone(own, me.id, slot)) return false
      // The majority of the masters that serve slots, counted in this node's view.
      const masters = own.filter((n) => n.flags.has('master') && n.slots.length > 0)
      const quorum = Math.floor(masters.length / 2) + 1
      const others = masters.filter((n) => n.id !== me.id && !n.flags.has('fail'))
      const views = await Promise.all(others.map((n) => this.#viewOf(n.address)))
      const agree = 1 + views.filter((v) => v !== undefined && seesAlone(v, me.id, slot)).length
      return agree >= quorum
    } catch {
      return false
    }
  }

  async #viewOf(address: string): Promise<ClusterNodeLine[] | undefined> {
    let peer = this.#peers.get(address)
    if (peer === undefined) {
      peer = this.#connect(address)
      this.#peers.set(address, peer)
    }
    try {
      return parseClusterNodes(String(await this.#bounded(peer.call('CLUSTER', 'NODES'))))
    } catch {
      // A peer that does not answer counts as not agreeing; its connection is made anew next time.
      if (this.#peers.get(address) === peer) this.#peers.delete(address)
      peer.disconnect()
      return undefined
    }
  }

  #bounded<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('cluster view timed out')), this.#timeoutMs)
      p.then(
        (v) => {
          clearTimeout(timer)
          resolve(v)
        },
        (err) => {
          clearTimeout(timer)
          reject(err)
        },
      )
    })
  }

  close(): void {
    for (const peer of this.#peers.values()) peer.disconnect()
    this.#peers.clear()
  }
}

/**
 * A single Redis node (not a Cluster): no failover can be decided by a majority, so the node is
 * alone when it is a master with no replica attached at all. With Sentinel in front of it this is
 * still a guess (a Sentinel can promote a replica it cannot see): run the Cluster for that.
 */
export class StandaloneAlone implements AloneCheck {
  async isAlone(_node: string, _slot: number, conn: Redis): Promise<boolean> {
    try {
      const info = String(await conn.info('replication'))
      return /role:master/.test(info) && /connected_slaves:0/.test(info)
    } catch {
      return false
    }
  }
  close(): void {}
}
