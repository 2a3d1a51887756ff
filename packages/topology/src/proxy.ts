import { connect, createServer, type Server, type Socket } from 'node:net'

/** A TCP proxy in front of one node that can delay, swallow, cut and refuse traffic. */
export interface FaultProxy {
  readonly port: number
  /**
   * Delays every chunk by ms (+ up to jitterMs), keeping the byte order: in both directions, or
   * only on the way to the node or to the client (a round trip of ms rather than 2 × ms). Timers
   * fire on whole milliseconds: a delay under 1 ms is about 1 ms.
   * @defaultValue jitterMs 0, direction 'both'
   */
  setLatency(ms: number, jitterMs?: number, direction?: LatencyDirection): void
  /**
   * Partition: connections are still accepted, but nothing is forwarded or answered in either
   * direction, for existing and new connections. Data that arrives meanwhile is discarded.
   */
  blackhole(on: boolean): void
  /**
   * Packet loss as TCP shows it to the application: each chunk (in either direction) is lost
   * with probability `share` and arrives only after `retransmitMs` (a retransmission timeout;
   * Linux waits at least 200 ms), and the chunks behind it wait for it, since TCP delivers in
   * order. Nothing is ever corrupted or dropped for good. `share` 0 turns it off.
   * @defaultValue retransmitMs 200
   */
  setPacketLoss(share: number, retransmitMs?: number): void
  /** Resets every current client connection now (the client sees ECONNRESET). */
  dropConnections(): void
  /** New connections are closed as soon as they are accepted. */
  refuse(on: boolean): void
  /** No latency, no packet loss, no blackhole, no refuse. */
  reset(): void
  close(): Promise<void>
}

/** Which way a proxy's latency applies. */
export type LatencyDirection = 'both' | 'to-node' | 'to-client'

interface Fault {
  latencyMs: number
  latencyDirection: LatencyDirection
  jitterMs: number
  lossShare: number
  retransmitMs: number
  blackholed: boolean
}

/** Linux's minimum TCP retransmission timeout (TCP_RTO_MIN). */
const DEFAULT_RETRANSMIT_MS = 200

/**
 * One direction of one connection. Chunks wait in a FIFO until their due time; a chunk is never
 * due before the one ahead of it, so jitter cannot reorder bytes.
 */
class Pipe {
  #queue: { due: number; chunk: Buffer }[] = []
  #timer: NodeJS.Timeout | undefined
  #lastDue = 0

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly fault: Fault,
    /** 'to-node' for client → node, 'to-client' for the replies. */
    private readonly direction: Exclude<LatencyDirection, 'both'>,
  ) {
    from.on('data', (chunk: Buffer) => this.#push(chunk))
    to.on('drain', () => from.resume())
  }

  #push(chunk: Buffer): void {
    if (this.fault.blackholed) return
    const { lossShare, retransmitMs, latencyDirection } = this.fault
    const delayed = latencyDirection === 'both' || latencyDirection === this.direction
    const latencyMs = delayed ? this.fault.latencyMs : 0
    const jitterMs = delayed ? this.fault.jitterMs : 0
    const lost = lossShare > 0 && Math.random() < lossShare
    if (!lost && latencyMs <= 0 && jitterMs <= 0 && this.#queue.length === 0) {
      this.#write(chunk)
      return
    }
    const delay = latencyMs + Math.random() * jitterMs + (lost ? retransmitMs : 0)
    const due = Math.max(Date.now() + delay, this.#lastDue)
    this.#lastDue = due
    this.#queue.push({ due, chunk })
    this.#schedule()
  }

  #schedule(): void {
    if (this.#timer || this.#queue.length === 0) return
    const wait = Math.max(0, this.#queue[0]!.due - Date.now())
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      const now = Date.now()
      while (this.#queue.length > 0 && this.#queue[0]!.due <= now) this.#write(this.#queue.shift()!.chunk)
      this.#schedule()
    }, wait)
  }

  #write(chunk: Buffer): void {
    // A blackhole swallows what was already in flight too, as a real partition would.
    if (this.fault.blackholed || this.to.destroyed) return
    if (!this.to.write(chunk)) this.from.pause()
  }

  dispose(): void {
    clearTimeout(this.#timer)
    this.#queue = []
  }
}

class Connection {
  readonly #pipes: Pipe[] = []
  /** The upstream went away while blackholed: close the client when the blackhole lifts. */
  upstreamGone = false

  constructor(
    readonly client: Socket,
    readonly upstream: Socket,
    fault: Fault,
    private readonly onClose: (c: Connection) => void,
  ) {
    this.#pipes.push(
      new Pipe(client, upstream, fault, 'to-node'),
      new Pipe(upstream, client, fault, 'to-client'),
    )
    client.on('error', () => this.destroy())
    client.on('close', () => this.destroy())
    upstream.on('error', () => {})
    upstream.on('close', () => {
      // A node that is down or restarting closes the upstream; behind a blackhole the client
      // must not notice that either.
      if (fault.blackholed) this.upstreamGone = true
      else this.destroy()
    })
  }

  #destroyed = false

  destroy(reset = false): void {
    if (this.#destroyed) return
    this.#destroyed = true
    for (const p of this.#pipes) p.dispose()
    if (reset) this.client.resetAndDestroy()
    else this.client.destroy()
    this.upstream.destroy()
    this.onClose(this)
  }
}

/** Where a proxy listens: a port number is `{ port }`. */
export interface ProxyListenOptions {
  /** @defaultValue 0 (a free port) */
  port?: number
  /** @defaultValue '127.0.0.1' */
  host?: string
}

/** Starts a proxy (on 127.0.0.1 and a free port unless `listen` says otherwise) forwarding to target. */
export async function startProxy(
  target: { host: string; port: number },
  listen: number | ProxyListenOptions = 0,
): Promise<FaultProxy> {
  const { port: listenPort = 0, host: listenHost = '127.0.0.1' } =
    typeof listen === 'number' ? { port: listen } : listen
  const fault: Fault = {
    latencyMs: 0,
    latencyDirection: 'both',
    jitterMs: 0,
    lossShare: 0,
    retransmitMs: DEFAULT_RETRANSMIT_MS,
    blackholed: false,
  }
  let refusing = false
  const connections = new Set<Connection>()

  const server: Server = createServer({ noDelay: true }, (client) => {
    if (refusing) {
      client.destroy()
      return
    }
    // A fresh upstream connection per client connection keeps the proxy working across node
    // restarts: the proxy's own port never changes, only redis-server's process does.
    const upstream = connect({ host: target.host, port: target.port, noDelay: true })
    connections.add(new Connection(client, upstream, fault, (c) => connections.delete(c)))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port: listenPort, host: listenHost }, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('proxy has no TCP address')

  const proxy: FaultProxy = {
    port: address.port,
    setLatency(ms, jitterMs = 0, direction = 'both') {
      if (direction !== 'both' && direction !== 'to-node' && direction !== 'to-client')
        throw new RangeError(
          `latency direction must be 'both', 'to-node' or 'to-client', got ${String(direction)}`,
        )
      fault.latencyMs = Math.max(0, ms)
      fault.jitterMs = Math.max(0, jitterMs)
      fault.latencyDirection = direction
    },
    setPacketLoss(share, retransmitMs = DEFAULT_RETRANSMIT_MS) {
      if (!(share >= 0 && share <= 1))
        throw new RangeError(`packet loss share must be in [0, 1], got ${share}`)
      fault.lossShare = share
      fault.retransmitMs = Math.max(0, retransmitMs)
    },
    blackhole(on) {
      fault.blackholed = on
      if (!on) for (const c of connections) if (c.upstreamGone) c.destroy()
    },
    dropConnections() {
      for (const c of connections) c.destroy(true)
    },
    refuse(on) {
      refusing = on
    },
    reset() {
      proxy.setLatency(0)
      proxy.setPacketLoss(0)
      proxy.blackhole(false)
      proxy.refuse(false)
    },
    close() {
      for (const c of connections) c.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
  return proxy
}
