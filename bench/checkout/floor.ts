/**
 * What a reservation costs at the least on this machine (issue 24): the service's CPU per
 * reservation against the cheapest checkouts Node can serve (floor-server.ts: bare and minimal
 * reserving servers on fastify and on node:http alone, each batching a turn's checkouts into one
 * script call on a standalone Redis) and, with --service, the service itself (the lua-replica
 * stack of run.ts: Redis Cluster with replicas, the worker, PostgreSQL). wrk sends the same
 * requests to each (wrk-checkout.lua's `buyers`: a new user on every request, no Idempotency-Key,
 * so every answer is a reservation), variants rotated over interleaved rounds.
 *
 *   npm run bench:checkout:floor [-- <flags as below>]   (ensure-redis, wrk, build, then this script)
 *   npx tsx bench/checkout/floor.ts [--rounds 3] [--seconds 8] [--connections 64] [--threads 1]
 *     [--variants fastify-bare,http-bare,fastify-reserve,http-reserve] [--instances 2]
 *     [--service] [--postgres URL]
 *
 * Per variant, medians (min–max) over rounds: requests/s, wrk's p50/p99, and CPU per request in µs
 * (CPU seconds over the measured window ÷ requests): the server's processes, and Redis (INFO cpu
 * of the standalone node; for the service, its six cluster nodes from /proc), and for the service
 * its worker and PostgreSQL. Prints a markdown table; writes no file.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { findFreePort, lineReader, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { spread } from '../locks/stats.js'
import { connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { FULL_SETTINGS } from './settings.js'
import { MeasureWindow, type Running, startTarget, waitQuiet } from './targets.js'
import { wrk } from './wrk.js'

const VARIANTS = ['fastify-bare', 'http-bare', 'fastify-reserve', 'http-reserve']
const SERVER = fileURLToPath(new URL('./floor-server.ts', import.meta.url))
const WARM_UP_S = 2

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    connections: { type: 'string', default: '64' },
    threads: { type: 'string', default: '1' },
    instances: { type: 'string', default: '2' },
    variants: { type: 'string', default: VARIANTS.join(',') },
    service: { type: 'boolean', default: false },
    postgres: { type: 'string', default: DEFAULT_POSTGRES_URL },
  },
})
const SERVICE = 'service (lua-replica)'
const ROUNDS = Number(values.rounds)
const SECONDS = Number(values.seconds)
const variants = values.variants.split(',')
for (const v of variants)
  if (!VARIANTS.includes(v)) throw new Error(`unknown variant ${v}: ${VARIANTS.join(', ')}`)
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be an integer ≥ 1')
if (!(SECONDS >= 2)) throw new Error('--seconds must be ≥ 2')
if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0)
  throw new Error('wrk is not installed: apt-get install wrk (or node scripts/ensure-tools.mjs wrk as root)')

const TICK_US = 1e6 / (Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100)

/** utime + stime of these processes, in µs (/proc, at the kernel's tick resolution). */
function cpuUs(pids: readonly number[]): number {
  let ticks = 0
  for (const pid of pids) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    ticks += Number(f[11]) + Number(f[12])
  }
  return ticks * TICK_US
}

async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu')
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN)
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6
}

/** `prefix` keeps each run's users new: the service's per-user limit would refuse a repeat. */
const runWrk = (baseUrl: string, seconds: number, prefix: string) =>
  wrk(baseUrl, { threads: Number(values.threads), connections: Number(values.connections), seconds }, [
    'buyers',
    prefix,
  ])

async function startServer(
  variant: string,
  redisPort: number,
): Promise<{ child: ChildProcess; port: number; workers: number[] }> {
  const port = await findFreePort()
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', SERVER, variant, String(port), String(redisPort), values.instances],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  )
  const next = lineReader(child)
  const ready = (async () => {
    for (;;) {
      const m = JSON.parse(await next()) as { ready?: boolean; workers?: number[] }
      if (m.ready) return m.workers ?? []
    }
  })()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${variant} did not listen within 30 s`)), 30_000)
  })
  const workers = await Promise.race([ready, late]).finally(() => clearTimeout(timer))
  return { child, port, workers }
}

interface Sample {
  rps: number
  p50: number
  p99: number
  serverUs: number
  redisUs: number
  /** The service's worker and PostgreSQL, µs per request (NaN for the floor servers). */
  workerUs: number
  postgresUs: number
  non2xx: number
}

const prefixOf = (round: number, variant: string) =>
  `${Date.now().toString(36)}${round}${VARIANTS.indexOf(variant) + 1}`

const nodes = await startNodes({ count: 1, proxy: false })
const node = nodes.nodes[0]!
const admin = new Redis({ host: node.host, port: node.port })
const all = values.service ? [...variants, SERVICE] : variants
const samples = new Map<string, Sample[]>(all.map((v) => [v, []]))
const dbs = values.service ? await connectDatabases(values.postgres) : undefined
let service: Running | undefined
try {
  if (dbs) service = await startTarget('lua-replica', { ...FULL_SETTINGS }, dbs, undefined)
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < all.length; i++) {
      const variant = all[(i + round) % all.length]!
      // The worker drains the service's last run in the background: not inside anyone's window.
      if (service) await waitQuiet([service], FULL_SETTINGS.drainDeadlineS)
      const prefix = prefixOf(round, variant)
      let s: Sample
      if (variant === SERVICE) {
        const url = service!.url
        runWrk(url, WARM_UP_S, `${prefix}w`)
        await waitQuiet([service!], FULL_SETTINGS.drainDeadlineS)
        const window = new MeasureWindow(service!)
        window.begin()
        const w = runWrk(url, SECONDS, prefix)
        const { cpu } = await window.end()
        const us = (cores: number | undefined) => ((cores ?? 0) / w.requestsPerSecond) * 1e6
        s = {
          rps: w.requestsPerSecond,
          p50: w.p50Ms,
          p99: w.p99Ms,
          serverUs: us(cpu.service),
          redisUs: us(cpu.redis),
          workerUs: us(cpu.worker),
          postgresUs: us(cpu.postgres),
          non2xx: w.non2xx,
        }
      } else {
        const server = await startServer(variant, node.port)
        try {
          const url = `http://127.0.0.1:${server.port}`
          runWrk(url, WARM_UP_S, `${prefix}w`)
          const s0 = cpuUs(server.workers)
          const r0 = await redisCpuUs(admin)
          const w = runWrk(url, SECONDS, prefix)
          s = {
            rps: w.requestsPerSecond,
            p50: w.p50Ms,
            p99: w.p99Ms,
            serverUs: (cpuUs(server.workers) - s0) / w.requests,
            redisUs: ((await redisCpuUs(admin)) - r0) / w.requests,
            workerUs: Number.NaN,
            postgresUs: Number.NaN,
            non2xx: w.non2xx,
          }
        } finally {
          server.child.kill('SIGTERM')
          await new Promise((resolve) => server.child.once('exit', resolve))
        }
      }
      samples.get(variant)!.push(s)
      process.stderr.write(
        `round ${round + 1} ${variant.padEnd(21)} ${s.rps.toFixed(0)} req/s  p50 ${s.p50} p99 ${s.p99} ms  server ${s.serverUs.toFixed(1)} µs/req  redis ${s.redisUs.toFixed(1)} µs/req  non-2xx ${s.non2xx}\n`,
      )
    }
  }
} finally {
  admin.disconnect()
  await service?.commands?.close()
  await service?.child.stop()
  await dbs?.dropAll()
  await nodes.stop()
}

const cell = (xs: number[], digits: number) => {
  const s = spread(xs)
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`
}
process.stdout.write(
  `\n${values.instances} server processes, wrk -t${values.threads} -c${values.connections}, ${SECONDS} s per run, ${ROUNDS} rotated round(s); medians (min–max)\n\n` +
    '| variant | requests/s | p50 ms | p99 ms | server CPU µs/request | Redis CPU µs/request | worker + PostgreSQL µs/request | non-2xx |\n|---|---:|---:|---:|---:|---:|---:|---:|\n',
)
for (const v of all) {
  const xs = samples.get(v)!
  const reserves = v !== 'fastify-bare' && v !== 'http-bare'
  process.stdout.write(
    `| ${v} | ${cell(
      xs.map((x) => x.rps),
      0,
    )} | ${cell(
      xs.map((x) => x.p50),
      2,
    )} | ${cell(
      xs.map((x) => x.p99),
      2,
    )} | ${cell(
      xs.map((x) => x.serverUs),
      1,
    )} | ${
      reserves
        ? cell(
            xs.map((x) => x.redisUs),
            1,
          )
        : '–'
    } | ${
      v === SERVICE
        ? cell(
            xs.map((x) => x.workerUs + x.postgresUs),
            1,
          )
        : '–'
    } | ${xs.reduce((a, x) => a + x.non2xx, 0)} |\n`,
  )
}
