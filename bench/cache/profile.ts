/**
 * Where a cache hit's time goes, for one or a few contenders on one topology: throughput, p99,
 * the slowest call and when it happened, the client's CPU per hit (process.cpuUsage) and the
 * servers' CPU per hit (INFO cpu of every master) with INFO commandstats (calls and µs per call
 * of each command). Not part of RESULTS.md: it is the tool behind its "Issue 9" profile.
 *
 *   npx tsx bench/cache/profile.ts [--topology cluster|standalone] [--contenders kunci,cache-manager]
 *                                  [--reps 3] [--seconds 2] [--concurrency 64] [--slow-ms 20]
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/cache/profile.ts ...   (CPU profile)
 *
 * `--slow-ms`: every call slower than that is logged with its offset in the sample, with the
 * event-loop delay (monitorEventLoopDelay) and the GC pauses (PerformanceObserver) seen meanwhile.
 */
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { startCluster, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { type Contender, type ContenderName, createContender, type Target } from './contenders.js'

const { values: args } = parseArgs({
  options: {
    topology: { type: 'string', default: 'cluster' },
    contenders: { type: 'string', default: 'kunci,cache-manager' },
    reps: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '64' },
    'slow-ms': { type: 'string', default: '20' },
  },
})
const NAMES = args.contenders.split(',') as ContenderName[]
const REPS = Number(args.reps)
const SECONDS = Number(args.seconds)
const CONCURRENCY = Number(args.concurrency)
const SLOW_MS = Number(args['slow-ms'])
const KEYS = Array.from({ length: 1000 }, (_, i) => `item:${i}`)
const product = (key: string) => ({
  id: key,
  name: `Product ${key}`,
  price: 19.99,
  tags: ['red', 'large', 'sale'],
  updatedAt: '2026-01-01T00:00:00.000Z',
})

const gcPauses: { at: number; ms: number; kind: number }[] = []
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcPauses.push({
      at: e.startTime,
      ms: e.duration,
      kind: (e as { detail?: { kind?: number } }).detail?.kind ?? 0,
    })
  }
}).observe({ entryTypes: ['gc'] })

interface ServerStats {
  cpuSec: number
  commands: Map<string, { calls: number; usec: number }>
}

async function serverStats(admins: Redis[]): Promise<ServerStats> {
  const out: ServerStats = { cpuSec: 0, commands: new Map() }
  for (const admin of admins) {
    const info = await admin.info('all')
    for (const line of info.split('\r\n')) {
      const cpu = line.match(/^used_cpu_(?:sys|user):([\d.]+)$/)
      if (cpu) out.cpuSec += Number(cpu[1])
      const cmd = line.match(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/)
      if (cmd) {
        const c = out.commands.get(cmd[1]!) ?? { calls: 0, usec: 0 }
        c.calls += Number(cmd[2])
        c.usec += Number(cmd[3])
        out.commands.set(cmd[1]!, c)
      }
    }
  }
  return out
}

/** Creates and warms a contender as run.ts does: its 1,000 keys loaded, then 0.3 s of hits. */
async function prepare(name: ContenderName, target: Target): Promise<Contender> {
  const c = await createContender(name, target, `prof:${Date.now().toString(36)}:${name}`)
  for (const key of KEYS) await c.getOrSet(key, async () => product(key))
  await hits(c, 0.3, undefined)
  return c
}

/** `seconds` of hits by CONCURRENCY callers; latencies and stalls go to `into`. */
interface Slow {
  at: number
  ms: number
  /** Wall time and process CPU time from the probe before the call to its end. */
  wallMs: number
  cpuMs: number
}

function cpuMs(): number {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

async function hits(
  c: Contender,
  seconds: number,
  into: { lat: number[]; slow: Slow[] } | undefined,
): Promise<number> {
  const loader = async () => product('x')
  const start = performance.now()
  const end = start + seconds * 1000
  // A probe of wall clock and process CPU every 512 calls: a slow call compares the two since
  // the probe before it started, which tells a process that ran (GC, JIT, a long task) from
  // one that the OS did not schedule (CPU ≪ wall), and both from a call that waited alone.
  let probe = { t: start, cpu: cpuMs() }
  let calls = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let now = performance.now(); now < end; ) {
        const before = probe
        await c.getOrSet(KEYS[(Math.random() * KEYS.length) | 0]!, loader)
        const after = performance.now()
        if (into !== undefined) {
          into.lat.push(after - now)
          if (after - now > SLOW_MS) {
            into.slow.push({
              at: now - start,
              ms: after - now,
              wallMs: after - before.t,
              cpuMs: cpuMs() - before.cpu,
            })
          }
        }
        if ((++calls & 511) === 0) probe = { t: after, cpu: cpuMs() }
        now = after
      }
    }),
  )
  return performance.now() - start
}

async function sample(
  name: ContenderName,
  c: Contender,
  target: Target,
  admins: Redis[],
  rep: number,
): Promise<void> {
  const lat: number[] = []
  const slow: Slow[] = []
  const drops0 = c.counters?.busDrops ?? 0
  const before = await serverStats(admins)
  const cpu0 = process.cpuUsage()
  const loop = monitorEventLoopDelay({ resolution: 10 })
  loop.enable()
  const gcFrom = gcPauses.length
  const t0 = performance.now()
  const elapsed = await hits(c, SECONDS, { lat, slow })
  loop.disable()
  const cpu = process.cpuUsage(cpu0)
  const after = await serverStats(admins)
  lat.sort((a, b) => a - b)
  const n = lat.length
  const us = (x: number) => Math.round(x * 1000)
  const gcs = gcPauses.slice(gcFrom).filter((g) => g.at >= t0)
  const gcMax = gcs.reduce((m, g) => Math.max(m, g.ms), 0)
  const gcSum = gcs.reduce((s, g) => s + g.ms, 0)
  console.info(
    `${target.kind} ${name} rep ${rep}: ${Math.round((n / elapsed) * 1000)} ops/s, p50 ${us(lat[n >> 1]!)} µs, ` +
      `p99 ${us(lat[Math.floor(n * 0.99)]!)} µs, max ${us(lat[n - 1]!)} µs; client CPU ${((cpu.user + cpu.system) / n).toFixed(2)} µs/hit, ` +
      `server CPU ${(((after.cpuSec - before.cpuSec) * 1e6) / n).toFixed(2)} µs/hit; ` +
      `loop delay max ${(loop.max / 1e6).toFixed(1)} ms; GC ${gcs.length} pauses, ${gcSum.toFixed(0)} ms, max ${gcMax.toFixed(1)} ms` +
      (c.counters ? `; bus drops ${c.counters.busDrops - drops0}` : ''),
  )
  for (const [cmd, s] of after.commands) {
    const b = before.commands.get(cmd) ?? { calls: 0, usec: 0 }
    const calls = s.calls - b.calls
    if (calls < n / 100) continue
    console.info(
      `    ${cmd}: ${(calls / n).toFixed(2)} per hit, ${((s.usec - b.usec) / calls).toFixed(2)} µs per call`,
    )
  }
  // Calls that stalled together are one episode: report each episode once, with the CPU the
  // process got meanwhile (of its slowest call's window).
  const episodes: { at: number; ms: number; calls: number; worst: Slow }[] = []
  for (const s of slow.sort((a, b) => a.at - b.at)) {
    const last = episodes.at(-1)
    if (last !== undefined && s.at <= last.at + last.ms) {
      last.ms = Math.max(last.ms, s.at + s.ms - last.at)
      last.calls++
      if (s.ms > last.worst.ms) last.worst = s
    } else episodes.push({ at: s.at, ms: s.ms, calls: 1, worst: s })
  }
  for (const e of episodes.slice(0, 10)) {
    const near = gcs.filter((g) => g.at - t0 >= e.at - 5 && g.at - t0 <= e.at + e.ms)
    console.info(
      `    stall at +${e.at.toFixed(0)} ms: ${e.calls} calls, up to ${e.ms.toFixed(1)} ms; ` +
        `process CPU ${e.worst.cpuMs.toFixed(1)} ms in ${e.worst.wallMs.toFixed(1)} ms of wall time; ` +
        `GC meanwhile: ${near.map((g) => `${g.ms.toFixed(1)} ms (kind ${g.kind})`).join(', ') || 'none'}`,
    )
  }
  if (episodes.length > 10) console.info(`    … ${episodes.length - 10} more stalls over ${SLOW_MS} ms`)
}

const PASSWORD = 'bench-secret'
const cluster = args.topology === 'cluster' ? await startCluster({ password: PASSWORD }) : undefined
const single =
  cluster === undefined ? await startNodes({ count: 1, proxy: false, password: PASSWORD }) : undefined
try {
  const target: Target =
    cluster !== undefined
      ? { kind: 'cluster', nodes: cluster.startupNodes, password: PASSWORD }
      : {
          kind: 'standalone',
          nodes: [{ host: single!.nodes[0]!.host, port: single!.nodes[0]!.port }],
          password: PASSWORD,
        }
  // Replicas serve no reads here: the masters do all the work.
  const masters = cluster !== undefined ? await cluster.masters() : target.nodes
  const admins = masters.map((n) => new Redis({ host: n.host, port: n.port, password: PASSWORD }))
  const live = new Map<ContenderName, Contender>()
  for (const name of NAMES) live.set(name, await prepare(name, target))
  for (let rep = 0; rep < REPS; rep++) {
    // Rotating order, as run.ts does.
    for (let i = 0; i < NAMES.length; i++) {
      const name = NAMES[(i + rep) % NAMES.length]!
      await sample(name, live.get(name)!, target, admins, rep)
    }
  }
  for (const c of live.values()) await c.close()
  for (const a of admins) a.disconnect()
} finally {
  await cluster?.stop()
  await single?.stop()
}
