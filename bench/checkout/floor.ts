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
 * (cores by process over the measured window, from /proc through cpu-share.ts as run.ts measures
 * them, ÷ requests/s): the server's processes, its Redis (the standalone node; for the service,
 * its six cluster nodes), and for the service its worker and PostgreSQL. Prints a markdown table;
 * writes no file.
 */
import { spawnSync } from 'node:child_process'
import { parseArgs } from 'node:util'
import { findFreePort, startNodes } from '@kunci/topology'
import { spread } from '../locks/stats.js'
import { startChild } from './children.js'
import { CpuSampler } from './cpu-share.js'
import { connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { FULL_SETTINGS } from './settings.js'
import { type Running, startTarget, waitQuiet } from './targets.js'
import { wrk } from './wrk.js'

const VARIANTS = ['fastify-bare', 'http-bare', 'fastify-reserve', 'http-reserve']
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

/** `prefix` keeps each run's users new: the service's per-user limit would refuse a repeat. */
const runWrk = (baseUrl: string, seconds: number, prefix: string) =>
  wrk(baseUrl, { threads: Number(values.threads), connections: Number(values.connections), seconds }, [
    'buyers',
    prefix,
  ])

interface Sample {
  rps: number
  p50: number
  p99: number
  /** CPU per request in µs, by process: the server, its Redis, and the service's worker + PostgreSQL. */
  serverUs: number
  redisUs: number
  pipelineUs: number
  non2xx: number
}

const prefixOf = (round: number, variant: string) =>
  `${Date.now().toString(36)}${round}${VARIANTS.indexOf(variant) + 1}`

/**
 * Warm-up, then one measured wrk run against `url`, with the cores of `roots` and their
 * descendants by category (cpu-share.ts, the checkout bench's sampler) turned into µs per request.
 */
function measure(url: string, prefix: string, roots: number[]): Sample {
  runWrk(url, WARM_UP_S, `${prefix}w`)
  const sampler = new CpuSampler()
  sampler.start()
  const w = runWrk(url, SECONDS, prefix)
  const cpu = sampler.stop(roots)
  const us = (cores: number | undefined) => ((cores ?? 0) / w.requestsPerSecond) * 1e6
  return {
    rps: w.requestsPerSecond,
    p50: w.p50Ms,
    p99: w.p99Ms,
    serverUs: us(cpu.service),
    redisUs: us(cpu.redis),
    pipelineUs: us(cpu.worker) + us(cpu.postgres),
    non2xx: w.non2xx,
  }
}

const nodes = await startNodes({ count: 1, proxy: false })
const node = nodes.nodes[0]!
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
        // The stack host's descendants: its service processes, Redis nodes and worker.
        s = measure(service!.url, prefix, [service!.child.pid!])
      } else {
        const port = await findFreePort()
        const server = await startChild(
          `floor ${variant}`,
          'floor-server.ts',
          [variant, String(port), String(node.port), values.instances],
          30_000,
        )
        try {
          s = measure(`http://127.0.0.1:${port}`, prefix, [server.pid!, node.pid!])
        } finally {
          await server.stop()
        }
      }
      samples.get(variant)!.push(s)
      process.stderr.write(
        `round ${round + 1} ${variant.padEnd(21)} ${s.rps.toFixed(0)} req/s  p50 ${s.p50} p99 ${s.p99} ms  server ${s.serverUs.toFixed(1)} µs/req  redis ${s.redisUs.toFixed(1)} µs/req  non-2xx ${s.non2xx}\n`,
      )
    }
  }
} finally {
  await service?.commands?.close()
  await service?.child.stop()
  await dbs?.dropAll()
  await nodes.stop()
}

const cell = (xs: Sample[], of: (x: Sample) => number, digits: number) => {
  const s = spread(xs.map(of))
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`
}
process.stdout.write(
  `\n${values.instances} server processes, wrk -t${values.threads} -c${values.connections}, ${SECONDS} s per run, ${ROUNDS} rotated round(s); medians (min–max)\n\n` +
    '| variant | requests/s | p50 ms | p99 ms | server CPU µs/request | Redis CPU µs/request | worker + PostgreSQL µs/request | non-2xx |\n|---|---:|---:|---:|---:|---:|---:|---:|\n',
)
for (const v of all) {
  const xs = samples.get(v)!
  const reserves = v !== 'fastify-bare' && v !== 'http-bare'
  const row = [
    v,
    cell(xs, (x) => x.rps, 0),
    cell(xs, (x) => x.p50, 2),
    cell(xs, (x) => x.p99, 2),
    cell(xs, (x) => x.serverUs, 1),
    reserves ? cell(xs, (x) => x.redisUs, 1) : '–',
    v === SERVICE ? cell(xs, (x) => x.pipelineUs, 1) : '–',
    String(xs.reduce((a, x) => a + x.non2xx, 0)),
  ]
  process.stdout.write(`| ${row.join(' | ')} |\n`)
}
