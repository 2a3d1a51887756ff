/**
 * RedisLock's `waitForReplicas`: after a grant, wait until the master's replicas hold it, without
 * any grant (or any other command of the user's) ever waiting behind another grant's WAIT.
 *
 * Why (issue 13): WAIT holds its connection until the replicas answer or its timeout passes. It
 * used to go out after every grant on the user's own connection to the master, the one the
 * script used. After a failover that left the promoted master without a replica, every WAIT held
 * that connection for the full timeout: the WAITs of many grants queued behind each other, and
 * every lock call and every other command the application sent on that client queued behind
 * them, for as long as callers kept coming (64 acquire loops: 14 grants/s instead of ~8,000, a
 * GET to that master took 3.8 s; test/integration/clients/redis-lock-wait.test.ts).
 *
 * How (the service's `replica-acks.ts` had the idea first; STYLE.md §11):
 * - **A connection of its own per master** (port.ts `Connection`), for nothing but these rounds:
 *   a WAIT there holds nothing but itself.
 * - **One round in flight per master.** A round is `SET <marker> 1 PX 1000`, then `WAIT replicas
 *   timeoutMs`. Grants that ask while a round is out share the next one (group commit), so the
 *   master sees at most one WAIT at a time from this manager however many grants it makes, and a
 *   grant waits for at most the round in flight and its own.
 * - **Why a marker write.** WAIT waits for the replication offset of its own connection's last
 *   write. The marker is written after the grants' replies arrived, and a master has one offset
 *   for all its connections, so a WAIT that covers the marker covers every grant before it. The
 *   marker lives in the slot of the newest caller's lock (keys.ts): if that node no longer serves
 *   the slot, the write is refused (MOVED) and nobody is told "acknowledged" by mistake.
 * - **No replica, no wait.** A round that ends with fewer acknowledgements than `replicas` (WAIT
 *   returned at its timeout) marks the master short of replicas: grants are then answered at
 *   once, and one probe round per `probeIntervalMs` (sent when a grant asks, no timer) notices a
 *   replica that came back.
 * - **Bounded.** A round that has not answered within timeoutMs + nodeTimeoutMs (plus the connect
 *   time-out on a new connection) gives up and drops its connection, so a late WAIT can never
 *   hold the next round.
 *
 * Best effort, as before: the outcome is published (`kunci:lock:replica-wait`), never thrown.
 */
import { keySlot } from '../cluster/slot.js'
import { replicaMarkerKey } from '../redis/keys.js'
import type { Connection, RedisPort } from '../redis/port.js'
import { hasSubscribers, publishEvent, REPLICA_WAIT_CHANNEL } from './events.js'

export interface ReplicaWaitSettings {
  readonly replicas: number
  /** WAIT's own timeout. */
  readonly timeoutMs: number
  /** While a master is short of replicas, one round this often checks again. */
  readonly probeIntervalMs: number
  /** How long past WAIT's timeout a round may take before it is given up (the manager's nodeTimeoutMs). */
  readonly slackMs: number
}

/** How a round ended: acknowledged by enough replicas, by fewer (WAIT timed out), or not at all. */
export type RoundOutcome = 'acked' | 'short' | 'error'

/** How long a new round connection may take to connect (TLS included) before the round gives up. */
const CONNECT_TIMEOUT_MS = 1_000
/** The marker only has to enter the replication stream; it expires soon, leaving no keys behind. */
const MARKER_TTL_MS = 1_000
/** CLIENT LIST shows the rounds' connections under this name. */
const CONNECTION_NAME = 'kunci:replica-wait'

interface NodeRounds {
  /** `host:port` of the master, as the client's slot table names it. */
  readonly address: string
  /** This master's round connection, once opened; dropped after a round that gave up. */
  conn: Connection | undefined
  /** A round is out: sent and neither answered nor given up. */
  inFlight: boolean
  /** A round is to start at the end of this tick, with every caller of the tick. */
  scheduled: boolean
  /** Callers of the next round: their grants were answered before it is sent. */
  next: (() => void)[]
  /** The next round's marker key: in the slot of its newest caller's lock. */
  marker: string
  /** The last round had too few acknowledgements: callers are answered at once. */
  short: boolean
  /** When the last round that found the master short ended (performance.now()). */
  probedAt: number
}

export class ReplicaWait {
  readonly #port: RedisPort
  readonly #prefix: string
  readonly #s: ReplicaWaitSettings
  readonly #nodes = new Map<string, NodeRounds>()
  #closed = false

  constructor(port: RedisPort, prefix: string, settings: ReplicaWaitSettings) {
    this.#port = port
    this.#prefix = prefix
    this.#s = settings
  }

  /**
   * Resolves once the replicas of the master serving `lockKey` hold every write it answered
   * before this call, or that could not be shown within the bound; never rejects. `undefined`
   * when there is nothing to wait for: the master is unknown, is known to be short of replicas,
   * or the manager is closed.
   */
  confirm(resource: string, lockKey: string): Promise<void> | undefined {
    if (this.#closed) return undefined
    const address = this.#addressOf(lockKey)
    if (address === undefined) return undefined
    let node = this.#nodes.get(address)
    if (node === undefined) {
      node = {
        address,
        conn: undefined,
        inFlight: false,
        scheduled: false,
        next: [],
        marker: '',
        short: false,
        probedAt: 0,
      }
      this.#nodes.set(address, node)
    }
    node.marker = this.#port.keyPrefix + replicaMarkerKey(this.#prefix, resource)
    if (node.short) {
      if (!node.inFlight && performance.now() - node.probedAt >= this.#s.probeIntervalMs)
        this.#round(node, [])
      return undefined
    }
    const confirmed = new Promise<void>((resolve) => node.next.push(resolve))
    this.#schedule(node)
    return confirmed
  }

  /** Answers every caller waiting for a round and closes the round connections. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    const closing: Promise<void>[] = []
    for (const node of this.#nodes.values()) {
      for (const resolve of node.next.splice(0)) resolve()
      const conn = node.conn
      node.conn = undefined
      // A round in flight ends with the connection (its callers are answered by its failure).
      if (conn && node.inFlight) conn.destroy()
      else if (conn) closing.push(conn.close())
    }
    this.#nodes.clear()
    await Promise.all(closing)
  }

  /** The master the client sends `lockKey`'s slot to now (after any MOVED it followed). */
  #addressOf(lockKey: string): string | undefined {
    const cluster = this.#port.cluster
    if (cluster === undefined) return this.#port.node?.address
    return cluster.ownerOf(keySlot(this.#port.keyPrefix + lockKey))
  }

  #schedule(node: NodeRounds): void {
    if (node.inFlight || node.scheduled) return
    node.scheduled = true
    // After the promise reactions of this turn: every grant answered by the same batch of
    // replies has asked by then, and they share the round.
    process.nextTick(this.#startScheduled, node)
  }

  #startScheduled = (node: NodeRounds): void => {
    node.scheduled = false
    if (this.#closed || node.inFlight || node.next.length === 0) return
    const callers = node.next
    node.next = []
    this.#round(node, callers)
  }

  #round(node: NodeRounds, callers: (() => void)[]): void {
    const { replicas, timeoutMs } = this.#s
    node.inFlight = true
    const started = performance.now()
    const marker = node.marker
    let conn = node.conn
    const opening = conn === undefined || conn.closed
    if (opening) {
      conn = this.#open(node.address)
      node.conn = conn
    }
    let done = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (outcome: RoundOutcome, acks: number): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      node.inFlight = false
      if (outcome === 'acked') node.short = false
      else if (outcome === 'short') {
        node.short = true
        node.probedAt = performance.now()
      }
      for (const resolve of callers) resolve()
      if (hasSubscribers(REPLICA_WAIT_CHANNEL)) {
        publishEvent(REPLICA_WAIT_CHANNEL, {
          address: node.address,
          acks,
          outcome,
          callers: callers.length,
          durationMs: performance.now() - started,
        })
      }
      this.#afterRound(node)
    }
    if (conn === undefined) {
      // No such master in the client's list (it moved between the grant and now).
      finish('error', 0)
      return
    }
    const round = conn
    // A round that does not answer in time (a node that went away or stopped, a connection that
    // cannot connect) is given up with its connection: a WAIT still running there would hold
    // the next round.
    timer = setTimeout(
      () => {
        if (node.conn === round) node.conn = undefined
        round.destroy()
        finish('error', 0)
      },
      (opening ? CONNECT_TIMEOUT_MS : 0) + timeoutMs + this.#s.slackMs,
    )
    timer.unref()
    round
      .connect()
      .then(() =>
        Promise.all([
          round.send('set', [marker, '1', 'PX', MARKER_TTL_MS]),
          round.send('wait', [replicas, timeoutMs]),
        ]),
      )
      .then(
        ([, acks]) => {
          if (typeof acks !== 'number') finish('error', 0)
          else finish(acks >= replicas ? 'acked' : 'short', acks)
        },
        () => {
          // A refused marker (MOVED: the slot moved) leaves a good connection; a dropped one goes.
          if (round.closed && node.conn === round) node.conn = undefined
          finish('error', 0)
        },
      )
  }

  /** Callers that came while the round was out: answered now if it found too few replicas. */
  #afterRound(node: NodeRounds): void {
    if (this.#closed || node.next.length === 0) return
    if (node.short) {
      for (const resolve of node.next.splice(0)) resolve()
      return
    }
    this.#schedule(node)
  }

  #open(address: string): Connection | undefined {
    const cluster = this.#port.cluster
    const node = cluster ? cluster.masters().find((m) => m.address === address) : this.#port.node
    return node?.connection({ connectTimeoutMs: CONNECT_TIMEOUT_MS, name: CONNECTION_NAME })
  }
}
