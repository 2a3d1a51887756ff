/**
 * The order in which one operation's requests go out to the nodes.
 *
 * An operation writes to N sockets one after the other, and each write costs the client
 * ~10–15 µs (the kernel's send path, measured on loopback with a C delay link in front of every
 * node: 5 writes took 70–80 µs from first to last). A quorum operation is decided by the reply
 * of the quorum-th fastest node, so that node's request should leave first: in index order it
 * leaves (quorum − 1) writes late, and every acquire and release pays that on its critical path.
 * Sent first instead, the faster nodes' requests follow while it is on its way and still answer
 * before it. The order is: the quorum fastest nodes, slowest of them first, then the rest,
 * fastest first. Nodes without a measured round trip (none yet: replies measure, errors and
 * time-outs do not) come after the measured ones in index order, and until the quorum-th
 * fastest is measured the order is simply fastest first.
 *
 * Node-redlock, @sesamecare-oss/redlock, redlock-universal and redis-semaphore write in the
 * order the clients were given. On links of 0.5–1.0 ms (bench/locks `--link-ms 0.5-1`) this is
 * ~2 % of C=1 throughput (bench/RESULTS.md, issue 24).
 */
export class SendOrder {
  readonly #n: number
  readonly #quorum: number
  /** Smoothed round trip per node (ms), Infinity until measured (so it sorts last). */
  readonly #rtt: Float64Array
  #order: number[] = []
  #computedAt = Number.NEGATIVE_INFINITY

  constructor(n: number, quorum: number) {
    this.#n = n
    this.#quorum = quorum
    this.#rtt = new Float64Array(n).fill(Number.POSITIVE_INFINITY)
  }

  /** A reply from `node`, `ms` after its request was written. */
  observe(node: number, ms: number): void {
    const prev = this.#rtt[node]!
    if (prev === Number.POSITIVE_INFINITY) {
      this.#rtt[node] = ms
      return
    }
    // EWMA, with a rise capped at RTT_WEIGHT of the estimate per reply: one late reply (a GC
    // pause, a reply held behind a slow command) moves a node by 10 %, while a node that turned
    // slow climbs 10 % per reply, ×45 within 40 replies.
    this.#rtt[node] = prev + Math.min(ms - prev, prev) * RTT_WEIGHT
  }

  /** The node indexes in the order to send; recomputed at most every REORDER_MS. */
  order(now: number): readonly number[] {
    if (now - this.#computedAt < REORDER_MS) return this.#order
    this.#computedAt = now
    const rtt = this.#rtt
    // Two unmeasured nodes: Infinity − Infinity is NaN, falsy, so they keep index order.
    const byRtt = Array.from({ length: this.#n }, (_, i) => i).sort((a, b) => rtt[a]! - rtt[b]! || a - b)
    const q = Math.min(this.#quorum, this.#n)
    // Until the quorum-th fastest node is known, which node decides is not known either.
    this.#order =
      rtt[byRtt[q - 1]!] === Number.POSITIVE_INFINITY
        ? byRtt
        : [...byRtt.slice(0, q).reverse(), ...byRtt.slice(q)]
    return this.#order
  }
}

const RTT_WEIGHT = 0.1
/** How often the order may change: often enough to follow a node that turns slow. */
const REORDER_MS = 200
