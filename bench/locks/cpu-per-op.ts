/**
 * CPU per uncontended acquire+release at concurrency 1, split into client (this process,
 * process.cpuUsage) and servers (used_cpu_user + used_cpu_sys from INFO cpu, summed over the 5
 * nodes). On a machine with fewer cores than processes the C=1 loop is CPU-bound, so these two
 * numbers explain its throughput better than latency does.
 *
 *   npm run build && npx tsx bench/locks/cpu-per-op.ts [--ops 3000] [--rounds 5] [--libs kunci,node-redlock]
 *     [--autopipelining]   every library's clients with enableAutoPipelining (as many services run)
 *
 * Rounds are interleaved and rotated like run.ts; each cell is the median over rounds.
 */
import { parseArgs } from 'node:util'
import { startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { type DriverFactory, LIBRARIES, type Library, type LockDriver } from './driver.js'
import {
  nodeRedlockDriver,
  redisSemaphoreDriver,
  redlockUniversalDriver,
  sesamecareDriver,
} from './peer-drivers.js'
import { spread } from './stats.js'

const { values } = parseArgs({
  options: {
    ops: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '5' },
    libs: { type: 'string', default: 'kunci,node-redlock' },
    autopipelining: { type: 'boolean', default: false },
  },
})
const OPS = Number(values.ops)
const ROUNDS = Number(values.rounds)
const libraries = values.libs.split(',') as Library[]
for (const l of libraries) if (!LIBRARIES.includes(l)) throw new Error(`unknown library ${l}`)
if (!Number.isInteger(OPS) || OPS < 100) throw new Error('--ops must be an integer ≥ 100')
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be an integer ≥ 1')

async function factoryFor(library: Library): Promise<DriverFactory> {
  switch (library) {
    case 'kunci':
      return (await import('./kunci-drivers.js')).kunciDriver
    case 'node-redlock':
      return nodeRedlockDriver
    case 'sesamecare-redlock':
      return sesamecareDriver
    case 'redlock-universal':
      return redlockUniversalDriver
    case 'redis-semaphore':
      return redisSemaphoreDriver
  }
}

/** Seconds of server CPU, summed over the nodes; INFO's own cost is the same for everyone. */
async function serverCpuSec(admins: readonly Redis[]): Promise<number> {
  const infos = await Promise.all(admins.map((a) => a.info('cpu')))
  let sum = 0
  for (const info of infos) {
    sum += Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? Number.NaN)
    sum += Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? Number.NaN)
  }
  return sum
}

/** µs that Redis spent executing top-level commands (EVALSHA includes its redis.call()s). */
async function commandUsec(admins: readonly Redis[]): Promise<number> {
  const infos = await Promise.all(admins.map((a) => a.info('commandstats')))
  let sum = 0
  for (const info of infos) {
    for (const m of info.matchAll(/^cmdstat_(\w+):calls=\d+,usec=(\d+)/gm)) {
      if (m[1] === 'evalsha' || m[1] === 'eval' || !INNER.has(m[1]!)) sum += Number(m[2])
    }
  }
  return sum
}
/** Commands that kunci and node-redlock run only inside scripts; their usec is inside EVALSHA's (not true of redis-semaphore, whose SET NX is a top-level command). */
const INNER = new Set([
  'get',
  'set',
  'del',
  'exists',
  'pttl',
  'setrange',
  'zadd',
  'zrem',
  'zpopmin',
  'pexpire',
  'publish',
])

interface Sample {
  clientUs: number
  serverUs: number
  /** Part of serverUs spent executing commands; the rest is I/O, parsing and the event loop. */
  execUs: number
  opsPerSec: number
}

async function measure(driver: LockDriver, admins: readonly Redis[], tag: string): Promise<Sample> {
  for (let i = 0; i < 300; i++) await (await driver.acquire(`cpu:${tag}:warm:${i}`)).release()
  await Promise.all(admins.map((a) => a.config('RESETSTAT')))
  const serverBefore = await serverCpuSec(admins)
  const clientBefore = process.cpuUsage()
  const start = performance.now()
  for (let i = 0; i < OPS; i++) await (await driver.acquire(`cpu:${tag}:${i}`)).release()
  const elapsedMs = performance.now() - start
  const client = process.cpuUsage(clientBefore)
  const serverSec = (await serverCpuSec(admins)) - serverBefore
  const execUs = (await commandUsec(admins)) / OPS
  return {
    execUs,
    clientUs: (client.user + client.system) / OPS,
    serverUs: (serverSec * 1e6) / OPS,
    opsPerSec: (OPS / elapsedMs) * 1000,
  }
}

const nodeSet = await startNodes({ count: 5, proxy: false })
const admins = nodeSet.nodes.map((n) => new Redis({ host: n.host, port: n.port }))
const drivers = new Map<Library, LockDriver>()
try {
  const config = {
    nodes: nodeSet.nodes.map((n) => ({ host: n.host, port: n.port })),
    ttlMs: 10_000,
    retry: { delayMs: 5, jitterMs: 5, count: 800 },
    clientOptions: { enableAutoPipelining: values.autopipelining },
  }
  for (const l of libraries) drivers.set(l, await (await factoryFor(l))(config))
  const samples = new Map<Library, Sample[]>(libraries.map((l) => [l, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < libraries.length; i++) {
      const library = libraries[(i + round) % libraries.length]!
      const s = await measure(drivers.get(library)!, admins, `${library}:${round}`)
      samples.get(library)!.push(s)
      process.stderr.write(
        `round ${round + 1} ${library}: client ${s.clientUs.toFixed(0)} µs, servers ${s.serverUs.toFixed(0)} µs (executing ${s.execUs.toFixed(0)}), ${s.opsPerSec.toFixed(0)} ops/s\n`,
      )
    }
  }
  const fmt = (xs: number[]) => {
    const { median, min, max } = spread(xs)
    return `${median.toFixed(0)} (${min.toFixed(0)}–${max.toFixed(0)})`
  }
  const lines = [
    '| library | client CPU µs/op | servers CPU µs/op | of which executing commands | total µs/op | ops/s |',
    '|---|---:|---:|---:|---:|---:|',
  ]
  for (const l of libraries) {
    const s = samples.get(l)!
    lines.push(
      `| ${l} | ${fmt(s.map((x) => x.clientUs))} | ${fmt(s.map((x) => x.serverUs))} | ${fmt(s.map((x) => x.execUs))} | ${fmt(s.map((x) => x.clientUs + x.serverUs))} | ${fmt(s.map((x) => x.opsPerSec))} |`,
    )
  }
  process.stdout.write(`\n${lines.join('\n')}\n\n`)
} finally {
  await Promise.allSettled([...drivers.values()].map((d) => d.close()))
  for (const a of admins) a.disconnect()
  await nodeSet.stop()
}
