import type { Redis } from 'ioredis'
import { keySlot } from 'kunci'
import type { AloneCheck } from './cluster-alone.js'

/** Where the writes to confirm were served, and a connection of our own to that node. */
export interface AckRoute {
  /** The node (`host:port`) serving `key`'s slot as the sale client routes it now; undefined if unknown. */
  nodeOf(key: string): string | undefined
  /** A new connection to `node`, used for nothing but the marker write, WAIT and the alone check. */
  connect(node: string): Redis
  /**
   * Decides, from the Cluster's own view, whether a master whose WAIT got 0 acknowledgements is
   * really alone (cluster-alone.ts). Without it no master is ever taken as alone.
   */
  alone?: AloneCheck
}

export interface ReplicaAcksOptions {
  /** Replicas that must acknowledge. @defaultValue 1 */
  replicas?: number
  /** WAIT's own timeout: how long a reservation may wait for a replica before 202. */
  timeoutMs: number
  /**
   * While a node is known to have no replica (its last WAIT timed out with 0 acknowledgements),
   * reservations are answered unconfirmed at once, and one WAIT round this often checks whether
   * a replica is back. @defaultValue 1000
   */
  probeIntervalMs?: number
  /** Called once per confirm() with how it ended, for metrics. */
  onOutcome?: (outcome: AckOutcome) => void
}

/**
 * How a confirmation ended:
 * - `acked`: a replica holds the writes;
 * - `alone`: no replica holds them and none can be promoted without them: the Cluster's majority
 *   sees this master healthy and each of its replicas failed (cluster-alone.ts). Its copy is the
 *   only one there is, and no failover can take it back;
 * - `no_replica`: the last round got 0 acknowledgements and the node could not be shown alone
 *   (a master cut off from its replica looks the same as one whose replica is gone): answered at
 *   once, not tried;
 * - `timeout`/`error`: it could not be shown this time.
 *
 * Only `acked` and `alone` make a write durable for those who must not act on a copy that a
 * failover can take back (the worker persisting to SQL, a unit's return marked done).
 */
export type AckOutcome = 'acked' | 'alone' | 'timeout' | 'no_replica' | 'error'

/** Whether an outcome shows that the next failover cannot take the writes back. */
export function isDurable(outcome: AckOutcome): boolean {
  return outcome === 'acked' || outcome === 'alone'
}

interface NodeState {
  conn: Redis | undefined
  inFlight: boolean
  /** Callers for the next round: their writes were answered before it is sent. */
  next: ((outcome: AckOutcome) => void)[]
  /** A key on this node's slot for the next round's marker write (the newest caller's). */
  marker: string
  noReplica: boolean
  /** The last round got 0 acknowledgements and the Cluster's view showed the node alone. */
  alone: boolean
  probedAt: number
}

/** How long past WAIT's own timeout a round may take before its connection is given up. */
const ROUND_SLACK_MS = 500
/** How long the alone check (CLUSTER NODES of the node and of the other masters) may take. */
const ALONE_CHECK_MS = 1_000

/**
 * Confirms that writes a master has already answered are held by a replica, without ever
 * making a checkout wait behind another checkout's WAIT (issue 13):
 *
 * - **One round in flight per node.** A round is `SET <marker> … ; WAIT n timeout` on a connection
 *   of its own to the node that served the writes. Callers that arrive while a round is out share
 *   the next one, so a node sees at most one WAIT at a time from this process, however many
 *   event-loop turns produce reservations. WAIT used to ride in each turn's reservation pipeline:
 *   once the promoted master had no replica, every pipeline held the shared connection for the
 *   full timeout, turns queued behind each other, and every checkout reached its deadline for as
 *   long as the crowd kept retrying.
 * - **Why a marker write.** WAIT waits for the replication offset of the calling connection's last
 *   write. The marker is written after the callers' replies arrived, so its offset is past all of
 *   their writes (the offset is one sequence per master), and one WAIT on this connection covers
 *   them all.
 * - **The same node.** The round goes to the node the sale client routes the slot to now (after
 *   any MOVED it followed), not through a second slot table. If that node no longer owns the
 *   slot, the marker is refused (MOVED) and the callers are answered unconfirmed: never a false
 *   "acked".
 * - **No replica, no wait.** A round that times out with 0 acknowledgements marks the node as
 *   short of replicas: until a probe round (every `probeIntervalMs`) sees a replica again,
 *   confirm() answers false at once (except to a caller that asks to wait: `probe`).
 * - **Alone is decided by the Cluster, not by WAIT** (issue 20). A master cut off from its replica
 *   by a partition gets 0 acknowledgements exactly like a promoted master whose old master is
 *   dead, but the first is about to be deposed and the second is the only copy there is. After a
 *   round with 0 acknowledgements the route's alone check (cluster-alone.ts) asks the node and the
 *   other masters; only if the majority sees the node healthy and every replica of it failed is
 *   the outcome `alone` (durable: no failover can take the writes back). Otherwise `no_replica`
 *   or `timeout`: not durable, and those who persist or finish work from these writes wait.
 */
/** The least time between two rounds asked for by waiting callers on a node short of replicas. */
const WAITING_PROBE_MS = 200

export class ReplicaAcks {
  readonly #route: AckRoute
  readonly #replicas: number
  readonly #timeoutMs: number
  readonly #probeIntervalMs: number
  readonly #onOutcome: ((outcome: AckOutcome) => void) | undefined
  readonly #nodes = new Map<string, NodeState>()
  #closed = false

  constructor(route: AckRoute, options: ReplicaAcksOptions) {
    this.#route = route
    this.#replicas = options.replicas ?? 1
    this.#timeoutMs = options.timeoutMs
    this.#probeIntervalMs = options.probeIntervalMs ?? 1_000
    this.#onOutcome = options.onOutcome
  }

  /**
   * Resolves true once the replicas hold every write answered on the node serving `markerKey`'s
   * slot before this call; false if that could not be shown within the timeout, or at once if the
   * node is known to have no replica. Never rejects; takes at most timeoutMs + 500 ms.
   */
  async confirm(markerKey: string, servedBy?: string): Promise<boolean> {
    return (await this.confirmOutcome(markerKey, servedBy)) === 'acked'
  }

  /**
   * The node (`host:port`) serving `key`'s slot as the client routes it now. Taken just before the
   * writes to confirm and passed to confirmOutcome as `servedBy`: a round that would go to another
   * node (the slot moved, a failover was followed) says nothing about those writes (issue 20: a
   * promoted replica, alone, "confirmed" what the deposed master had answered).
   */
  nodeOf(key: string): string | undefined {
    return this.#closed ? undefined : this.#route.nodeOf(key)
  }

  /**
   * confirm(), telling how it ended (AckOutcome). `isDurable(outcome)` — `acked`, or `alone`
   * (the Cluster's majority shows that no replica could be promoted without these writes) — is
   * what the worker needs before persisting and a return before it counts as done; anything else
   * could be taken back by the next failover: try again later.
   *
   * `probe`: a caller that waits on purpose for a replica to catch up (SaleStore.waitDurable) asks
   * for a round even while the node is marked short of replicas, instead of the answer from
   * memory until the next probe: a round that timed out only because a replica was slow (WAIT's
   * 50 ms on a loaded machine) would otherwise keep it unconfirmed for the whole probe interval.
   * Still one round in flight per node, shared by every caller, and a new one at most every
   * 200 ms while the node stays short of replicas.
   */
  confirmOutcome(markerKey: string, servedBy?: string, probe = false): Promise<AckOutcome> {
    const node = this.#closed ? undefined : this.#route.nodeOf(markerKey)
    if (node === undefined || (servedBy !== undefined && node !== servedBy)) return this.#answer('error')
    let st = this.#nodes.get(node)
    if (st === undefined) {
      st = {
        conn: undefined,
        inFlight: false,
        next: [],
        marker: markerKey,
        noReplica: false,
        alone: false,
        probedAt: 0,
      }
      this.#nodes.set(node, st)
    }
    // A caller that waits on purpose joins the round in flight, or starts one at most every
    // WAITING_PROBE_MS: while a replica is really gone, hundreds of waiting checkouts must not
    // turn into back-to-back rounds.
    const waitingProbe = probe && (st.inFlight || Date.now() - st.probedAt >= WAITING_PROBE_MS)
    if (st.noReplica && !waitingProbe) {
      if (!st.inFlight && Date.now() - st.probedAt >= this.#probeIntervalMs) {
        st.probedAt = Date.now()
        st.marker = markerKey
        this.#send(node, st)
      }
      return this.#answer(st.alone ? 'alone' : 'no_replica')
    }
    st.marker = markerKey
    const wait = new Promise<AckOutcome>((resolve) => st.next.push(resolve))
    if (!st.inFlight) this.#send(node, st)
    return wait
  }

  #answer(outcome: AckOutcome): Promise<AckOutcome> {
    this.#onOutcome?.(outcome)
    return Promise.resolve(outcome)
  }

  #send(node: string, st: NodeState): void {
    const callers = st.next
    st.next = []
    st.inFlight = true
    let conn = st.conn
    if (conn === undefined) {
      conn = this.#route.connect(node)
      st.conn = conn
    }
    let done = false
    const finish = (outcome: Exclude<AckOutcome, 'no_replica'>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      st.inFlight = false
      for (const resolve of callers) {
        this.#onOutcome?.(outcome)
        resolve(outcome)
      }
      if (st.next.length > 0 && !this.#closed) {
        // Callers that came while this round was out: if it just showed there is no replica,
        // they are answered now instead of waiting for a round that would time out too.
        if (st.noReplica) {
          const waiting = st.next
          st.next = []
          const now: AckOutcome = st.alone ? 'alone' : 'no_replica'
          for (const resolve of waiting) {
            this.#onOutcome?.(now)
            resolve(now)
          }
        } else this.#send(node, st)
      }
    }
    // A node that went away leaves the round unanswered: give up on it and on its connection
    // (a new one is made for the next round; by then the slot has usually moved).
    // The alone check (after a WAIT with 0 acknowledgements) is bounded by its own timeout.
    const timer = setTimeout(
      () => {
        if (st.conn === conn) st.conn = undefined
        conn.disconnect()
        finish('error')
      },
      this.#timeoutMs + ROUND_SLACK_MS + ALONE_CHECK_MS,
    )
    const marker = st.marker
    conn
      .pipeline()
      .set(marker, '1', 'PX', 60_000)
      .wait(this.#replicas, this.#timeoutMs)
      .exec()
      .then(
        async (results) => {
          const [setErr] = results?.[0] ?? [new Error('no reply')]
          const [waitErr, acks] = results?.[1] ?? [new Error('no reply'), 0]
          if (setErr || waitErr) return finish('error')
          if (Number(acks) >= this.#replicas) {
            st.noReplica = false
            st.alone = false
            return finish('acked')
          }
          if (Number(acks) === 0) {
            // 0 acknowledgements: a replica gone, or one cut off. Only the Cluster's view tells.
            st.alone = (await this.#route.alone?.isAlone(node, keySlot(marker), conn)) ?? false
            st.noReplica = true
            st.probedAt = Date.now()
            return finish(st.alone ? 'alone' : 'timeout')
          }
          finish('timeout')
        },
        () => finish('error'),
      )
      .catch(() => finish('error'))
  }

  /** Answers every caller waiting for a round (unconfirmed) and closes the connections. */
  close(): void {
    this.#closed = true
    for (const st of this.#nodes.values()) {
      for (const resolve of st.next) resolve('error')
      st.next = []
      st.conn?.disconnect()
      st.conn = undefined
    }
    this.#nodes.clear()
    this.#route.alone?.close()
  }
}
