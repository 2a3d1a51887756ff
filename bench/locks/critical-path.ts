/**
 * Where an operation's time goes at concurrency 1, kunci against node-redlock, on delay links
 * (issue 24's lock at C=1): for every acquire and every release, timed on the sockets of the
 * five node connections,
 *
 *   before      from the call to the first request written to a socket (the library's own work)
 *   writes      from the first request written to the fifth (five writes, one per node)
 *   to quorum   from the fifth write to the third reply read (the links and the servers)
 *   after       from the third reply read to the call resolving (kunci decides there; a library
 *               that waits for every node resolves after the fifth)
 *
 * Operations of the two libraries alternate one by one in one process on the same nodes and
 * links, so the machine's drift hits both alike. Timestamps are taken in a wrapper around each
 * socket's `write` and in a 'data' listener placed first; each reply is matched to its request by
 * counting script calls per connection (a reply to anything else, such as kunci's INFO of a node,
 * is not counted). The wrapper costs both libraries the same few µs per write.
 *
 *   npm run build && npx tsx bench/locks/critical-path.ts [--link-ms 1] [--ops 1000]
 *
 * Prints medians in µs per phase. Not a throughput benchmark: run.ts is (bench/RESULTS.md).
 */
import type { Socket } from 'node:net'
import { parseArgs } from 'node:util'
import { startDelayLinks, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { Redlock } from 'kunci'
import { Redlock as NodeRedlockClass } from './peer-drivers.js'
import { spread } from './stats.js'

const { values } = parseArgs({
  options: { 'link-ms': { type: 'string', default: '1' }, ops: { type: 'string', default: '1000' } },
})
const LINK_MS = Number(values['link-ms'])
const OPS = Number(values.ops)
if (!(LINK_MS >= 0 && LINK_MS <= 100)) throw new Error('--link-ms must be a number of ms in [0, 100]')
if (!Number.isInteger(OPS) || OPS < 100) throw new Error('--ops must be an integer ≥ 100')
const TTL_MS = 10_000
const WARM_UP = 200

/** One connection's script requests and their replies, in order. */
interface Wire {
  writes: number[]
  replies: number[]
}

/** Times every script call written to the client's socket and every reply read from it. */
function tap(client: Redis): Wire {
  const wire: Wire = { writes: [], replies: [] }
  const socket = (client as unknown as { stream: Socket }).stream
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
  socket.write = ((...args: unknown[]) => {
    const chunk = args[0]
    if (
      typeof chunk === 'string'
        ? /evalsha/i.test(chunk)
        : Buffer.isBuffer(chunk) && /evalsha/i.test(chunk.toString('latin1', 0, 64))
    )
      wire.writes.push(performance.now())
    return write(...args)
  }) as Socket['write']
  // Script replies here are integers (":…") or, for a fenced kunci grant, an array ("*3" of
  // integers); a chunk may carry several (a straggler's reply and the next one's).
  socket.prependListener('data', (chunk: Buffer) => {
    const first = chunk[0]
    if (first !== 0x3a && first !== 0x2a) return
    const now = performance.now()
    const lines = chunk.toString('latin1').split('\r\n')
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!
      if (line.startsWith(':')) wire.replies.push(now)
      else if (line.startsWith('*')) {
        wire.replies.push(now)
        i += Number(line.slice(1))
      }
    }
  })
  return wire
}

interface Phase {
  before: number
  writes: number
  toQuorum: number
  after: number
  total: number
}

const nodeSet = await startNodes({ count: 5, proxy: false })
const links =
  LINK_MS > 0
    ? await startDelayLinks(nodeSet.nodes.map((n) => ({ host: n.host, port: n.port, delayMs: LINK_MS })))
    : undefined
const dial = () =>
  links
    ? links.ports.map((port) => new Redis({ host: '127.0.0.1', port }))
    : nodeSet.nodes.map((n) => new Redis({ host: n.host, port: n.port }))
const kunciClients = dial()
const peerClients = dial()
try {
  await Promise.all([...kunciClients, ...peerClients].map((c) => c.ping()))
  const kunci = new Redlock({
    clients: kunciClients,
    ttlMs: TTL_MS,
    quarantine: false,
    persistence: 'none',
    retryCount: 800,
    retryDelayMs: 5,
    retryJitterMs: 5,
  })
  const peer = new NodeRedlockClass(peerClients, { retryCount: 800, retryDelay: 5, retryJitter: 5 })
  peer.on('error', () => {})
  const wires = new Map<Redis, Wire>([...kunciClients, ...peerClients].map((c) => [c, tap(c)]))

  const libraries = {
    kunci: { clients: kunciClients, acquire: (key: string) => kunci.acquire(key) },
    'node-redlock': { clients: peerClients, acquire: (key: string) => peer.acquire([key], TTL_MS) },
  }
  type Name = keyof typeof libraries
  const samples: Record<Name, { acquire: (() => Phase)[]; release: (() => Phase)[] }> = {
    kunci: { acquire: [], release: [] },
    'node-redlock': { acquire: [], release: [] },
  }

  /** Runs one phase; returns how to read its timings once every reply has arrived. */
  async function timed(clients: Redis[], run: () => Promise<unknown>): Promise<() => Phase> {
    const at = clients.map((c) => wires.get(c)!.writes.length)
    const t0 = performance.now()
    await run()
    const t1 = performance.now()
    return () => {
      const w = clients.map((c, i) => wires.get(c)!.writes[at[i]!]!).sort((a, b) => a - b)
      const r = clients.map((c, i) => wires.get(c)!.replies[at[i]!]!).sort((a, b) => a - b)
      return {
        before: w[0]! - t0,
        writes: w[4]! - w[0]!,
        toQuorum: r[2]! - w[4]!,
        after: t1 - r[2]!,
        total: t1 - t0,
      }
    }
  }

  // Warm-up first, uncounted: the scripts get loaded (NOSCRIPT, EVAL, SCRIPT LOAD) and kunci reads
  // each node's INFO; then the count starts from a quiet moment, one reply per script call.
  for (let i = 0; i < WARM_UP; i++) {
    await (await kunci.acquire(`critical-path:warm-up:${i}`)).release()
    await (await peer.acquire([`critical-path:warm-up:${i}`], TTL_MS)).release()
  }
  await new Promise((resolve) => setTimeout(resolve, 200 + 4 * LINK_MS))
  for (const w of wires.values()) {
    w.writes.length = 0
    w.replies.length = 0
  }
  for (let i = 0; i < OPS; i++) {
    for (const name of (i % 2 === 0 ? ['kunci', 'node-redlock'] : ['node-redlock', 'kunci']) as Name[]) {
      const lib = libraries[name]
      let lock: { release(): Promise<unknown> } | undefined
      const acquire = await timed(lib.clients, async () => {
        lock = await lib.acquire(`critical-path:${name}:${i}`)
      })
      const release = await timed(lib.clients, () => lock!.release())
      samples[name].acquire.push(acquire)
      samples[name].release.push(release)
    }
  }
  // The replies a quorum did not wait for are in by now.
  await new Promise((resolve) => setTimeout(resolve, 200 + 4 * LINK_MS))
  for (const w of wires.values()) {
    if (w.replies.length !== w.writes.length)
      throw new Error(`a connection saw ${w.writes.length} script calls and ${w.replies.length} replies`)
  }

  const us = (x: number) => (x * 1000).toFixed(0)
  const lines = [
    `C=1, 5 nodes, links +${LINK_MS} ms, ${OPS} operations per library (after ${WARM_UP} to warm up), medians in µs`,
    '',
    '| library | phase | before | writes | to quorum | after | total |',
    '|---|---|---:|---:|---:|---:|---:|',
  ]
  for (const name of Object.keys(samples) as Name[]) {
    for (const phase of ['acquire', 'release'] as const) {
      const ps = samples[name][phase].map((read) => read())
      const m = (f: keyof Phase) => us(spread(ps.map((p) => p[f])).median)
      lines.push(
        `| ${name} | ${phase} | ${m('before')} | ${m('writes')} | ${m('toQuorum')} | ${m('after')} | ${m('total')} |`,
      )
    }
  }
  process.stdout.write(`${lines.join('\n')}\n`)
  await kunci.close()
} finally {
  for (const c of [...kunciClients, ...peerClients]) c.disconnect()
  await links?.stop()
  await nodeSet.stop()
}
