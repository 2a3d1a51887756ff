/**
 * Checkout benchmark (issue 6): the flash-sale service's `lua` strategy (durability replica and
 * none) and `redlock` strategy against a bare fastify server answering a constant, in the same
 * process model (node:cluster, the same number of instances), driven by the same load generator
 * in the same run, in interleaved rounds (A B C D, B C D A, …).
 *
 *   npm run bench:checkout [-- <flags>]          (ensure-redis, build, then this script)
 *   npx tsx bench/checkout/run.ts [--quick] [--rounds N] [--connections N] [--instances N]
 *     [--targets bare,lua-replica,lua-none,redlock] [--no-open] [--postgres URL]
 *
 * 1. Closed loop (maximum throughput): every target, every round; the sale has a stock that does
 *    not run out and users are drawn from a huge range, so the answers are sales (200).
 * 2. Open loop: at a fixed rate of half of each lua variant's closed-loop median (the bare server
 *    at lua-replica's rate, as a floor), latency measured from the scheduled send time.
 * Before each run, the bench waits until every stack's worker has persisted the previous runs'
 * orders (stream lag + pending = 0), so one target's backlog does not slow the next one down.
 *
 * Each stack (Redis Cluster 3+3, SQL on a fresh PostgreSQL database, service, worker; the 5 lock
 * nodes for redlock) runs in its own host process; the load generator is this process.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import type { StackOptions } from '@kunci/flash-sale-lab'
import { findFreePort } from '@kunci/topology'
import { spread } from '../locks/stats.js'
import { type BenchChild, startChild } from './children.js'
import { runClosedLoop } from './closed-loop.js'
import { CpuSampler } from './cpu-share.js'
import { describeEnvironment, loadAverage, writeResults } from './environment.js'
import { runOpenLoop } from './open-loop.js'
import { type BenchDatabases, connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { type ClosedRun, formatReport, type OpenRun, summarize } from './report.js'
import {
  type BenchSettings,
  FULL_SETTINGS,
  PRODUCT_ID,
  QUICK_SETTINGS,
  RATE_REFERENCE,
  TARGETS,
  type Target,
} from './settings.js'

const HELP = `Usage: npm run bench:checkout -- [options]
       npx tsx bench/checkout/run.ts [options]        (after npm run build)

Measures the flash-sale checkout (lua replica, lua none, redlock) against a bare fastify server
in interleaved rounds and writes bench/results/checkout-<date>-<sha>.json.

Options:
  --quick              short smoke run (1 round, 3 s runs); numbers are not comparable
  --rounds N           interleaved rounds (default ${FULL_SETTINGS.rounds})
  --connections N      closed-loop connections (default ${FULL_SETTINGS.connections})
  --instances N        processes per target, node:cluster (default ${FULL_SETTINGS.instances})
  --seconds N          measured seconds of each run (default ${FULL_SETTINGS.closedSeconds})
  --targets a,b,...    subset of ${TARGETS.join(',')} (default all;
                       lua-noworker is lua-replica without the order worker, a diagnostic)
  --no-open            skip the open-loop (latency at half the maximum rate) part
  --postgres URL       PostgreSQL server; a fresh database per stack is created and dropped
                       (default ${DEFAULT_POSTGRES_URL})
  --help               this text
`

class BenchUsageError extends Error {
  readonly code = 'E_BENCH_USAGE'
}

function integer(flag: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < min)
    throw new BenchUsageError(`${flag} must be an integer ≥ ${min}, got ${value}`)
  return n
}

interface Cli {
  settings: BenchSettings
  quick: boolean
  targets: Target[]
  open: boolean
  postgres: string
}

function parseCli(): Cli | undefined {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      instances: { type: 'string' },
      seconds: { type: 'string' },
      targets: { type: 'string' },
      'no-open': { type: 'boolean', default: false },
      postgres: { type: 'string', default: DEFAULT_POSTGRES_URL },
      help: { type: 'boolean', default: false },
    },
  })
  if (values.help) return undefined
  const base = values.quick ? QUICK_SETTINGS : FULL_SETTINGS
  const seconds = integer('--seconds', values.seconds, base.closedSeconds, 1)
  const settings: BenchSettings = {
    ...base,
    rounds: integer('--rounds', values.rounds, base.rounds, 1),
    connections: integer('--connections', values.connections, base.connections, 1),
    instances: integer('--instances', values.instances, base.instances, 1),
    closedSeconds: seconds,
    openSeconds: seconds,
  }
  const targets = values.targets === undefined ? [...TARGETS] : (values.targets.split(',') as Target[])
  const unknown = targets.filter((t) => !TARGETS.includes(t))
  if (unknown.length > 0)
    throw new BenchUsageError(`unknown --targets ${unknown.join(',')}; choose from ${TARGETS.join(',')}`)
  return { settings, quick: values.quick, targets, open: !values['no-open'], postgres: values.postgres }
}

interface Running {
  target: Target
  url: string
  workerMetricsUrl: string | undefined
  child: BenchChild<{ ready: true }>
}

function stackOptions(target: Target, settings: BenchSettings, databaseUrl: string): StackOptions {
  const redlock = target === 'redlock'
  return {
    strategy: redlock ? 'redlock' : 'lua',
    durability: target === 'lua-none' ? 'none' : 'replica',
    instances: settings.instances,
    port: 0,
    databaseUrl,
    lockNodes: redlock,
    worker: target !== 'lua-noworker',
    sale: { productId: String(PRODUCT_ID), stock: settings.stock, perUserLimit: settings.perUserLimit },
  }
}

async function startTarget(target: Target, settings: BenchSettings, dbs: BenchDatabases): Promise<Running> {
  if (target === 'bare') {
    const port = await findFreePort()
    const child = await startChild<{ ready: true }>(
      'bare',
      'bare-server.ts',
      [String(port), String(settings.instances)],
      60_000,
    )
    return { target, url: `http://127.0.0.1:${port}`, workerMetricsUrl: undefined, child }
  }
  const options = stackOptions(target, settings, await dbs.create(target))
  const child = await startChild<{ ready: true; url: string; workerMetricsUrl: string }>(
    target,
    'stack-host.ts',
    [JSON.stringify(options)],
    180_000,
  )
  const workerMetricsUrl = options.worker === false ? undefined : child.ready.workerMetricsUrl
  return { target, url: child.ready.url, workerMetricsUrl, child }
}

/** Stream lag + pending of one stack's worker (orders the worker has yet to persist). */
async function backlog(metricsUrl: string): Promise<number> {
  const text = await fetch(metricsUrl).then(
    (r) => r.text(),
    () => '',
  )
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith('flash_sale_stream_lag') || line.startsWith('flash_sale_stream_pending')) {
      const v = Number(line.slice(line.lastIndexOf(' ') + 1))
      if (Number.isFinite(v)) sum += v
    }
  }
  return sum
}

/** Waits (up to the deadline) until every worker has caught up; returns the backlog left. */
async function waitQuiet(running: Running[], deadlineS: number): Promise<number> {
  const deadline = Date.now() + deadlineS * 1000
  for (;;) {
    const left = (
      await Promise.all(running.flatMap((r) => (r.workerMetricsUrl ? [backlog(r.workerMetricsUrl)] : [])))
    ).reduce((a, b) => a + b, 0)
    if (left === 0 || Date.now() > deadline) return left
    await sleep(1_000)
  }
}

/** Round r runs the targets rotated by r, so no target always runs first (or right after another). */
function rotate<T>(items: T[], by: number): T[] {
  const k = by % items.length
  return [...items.slice(k), ...items.slice(0, k)]
}

async function main(): Promise<void> {
  let cli: Cli | undefined
  try {
    cli = parseCli()
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${HELP}`)
    process.exitCode = 2
    return
  }
  if (!cli) {
    process.stdout.write(HELP)
    return
  }
  const { settings, targets } = cli
  const log = (line: string) => process.stderr.write(`${line}\n`)
  const dbs = await connectDatabases(cli.postgres)
  const env = describeEnvironment(dbs.version)
  log(
    `checkout bench: ${targets.join(', ')}; ${settings.rounds} round(s); load average ${env.loadAverageAtStart.join(' ')}`,
  )
  const running: Running[] = []
  const stopAll = async () => {
    await Promise.all(running.splice(0).map((r) => r.child.stop()))
    await dbs.dropAll()
  }
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    log('interrupted: stopping the stacks…')
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  const closed: ClosedRun[] = []
  const open: OpenRun[] = []
  try {
    // One at a time: starting four stacks at once on 2 cores times out readiness checks.
    for (const t of targets) {
      log(`starting ${t}…`)
      running.push(await startTarget(t, settings, dbs))
      if (interrupted) return
    }
    const byTarget = (t: Target) => running.find((r) => r.target === t)!

    for (let round = 1; round <= settings.rounds && !interrupted; round++) {
      for (const t of rotate(targets, round - 1)) {
        if (interrupted) break
        const backlogAtStart = await waitQuiet(running, settings.drainDeadlineS)
        const loadAverage1m = loadAverage()[0]!
        const sampler = new CpuSampler()
        sampler.start()
        const sample = await runClosedLoop({
          url: byTarget(t).url,
          connections: settings.connections,
          warmupS: settings.closedWarmupS,
          seconds: settings.closedSeconds,
          productId: PRODUCT_ID,
          userIdMax: settings.userIdMax,
        })
        const cpu = sampler.stop(byTarget(t).child.pid === undefined ? [] : [byTarget(t).child.pid!])
        closed.push({ round, target: t, loadAverage1m, backlogAtStart, cpu, sample })
        log(
          `closed r${round} ${t.padEnd(11)} ${String(sample.requestsPerSecond).padStart(6)} req/s  sales ${sample.salesPerSecond}/s  p50 ${sample.latency.p50Ms.toFixed(2)} p99 ${sample.latency.p99Ms.toFixed(2)} ms  ${JSON.stringify(sample.byStatus)}  load ${loadAverage1m}  cores ${JSON.stringify(cpu)}`,
        )
      }
    }

    const median = (t: Target) =>
      spread(closed.filter((c) => c.target === t).map((c) => c.sample.requestsPerSecond)).median
    const openTargets = cli.open
      ? targets.filter(
          (t) =>
            t === 'lua-replica' || t === 'lua-none' || (t === 'bare' && targets.includes(RATE_REFERENCE)),
        )
      : []
    const rateOf = (t: Target) =>
      Math.max(1, Math.round(settings.openRateShare * median(t === 'bare' ? RATE_REFERENCE : t)))
    for (let round = 1; round <= settings.rounds && !interrupted && openTargets.length > 0; round++) {
      for (const t of rotate(openTargets, round - 1)) {
        if (interrupted) break
        const backlogAtStart = await waitQuiet(running, settings.drainDeadlineS)
        const loadAverage1m = loadAverage()[0]!
        const sampler = new CpuSampler()
        sampler.start()
        const sample = await runOpenLoop({
          url: byTarget(t).url,
          rate: rateOf(t),
          warmupS: settings.openWarmupS,
          seconds: settings.openSeconds,
          connections: settings.openConnections,
          productId: PRODUCT_ID,
          userIdMax: settings.userIdMax,
        })
        const cpu = sampler.stop(byTarget(t).child.pid === undefined ? [] : [byTarget(t).child.pid!])
        open.push({ round, target: t, loadAverage1m, backlogAtStart, cpu, sample })
        log(
          `open   r${round} ${t.padEnd(11)} ${sample.rate}/s  p50 ${sample.latency.p50Ms} p99 ${sample.latency.p99Ms} p99.9 ${sample.latency.p999Ms} ms  send lag p99 ${sample.sendLag.p99Ms} ms  ${JSON.stringify(sample.byStatus)}  load ${loadAverage1m}`,
        )
      }
    }
  } finally {
    log('stopping…')
    await stopAll()
  }
  if (closed.length === 0) return
  const summary = summarize(closed, open)
  const file = writeResults(env, cli.quick, { env, settings, targets, closed, open, summary })
  process.stdout.write(`${formatReport(env, settings, summary, file)}\n`)
  if (interrupted) process.exitCode = 130
}

await main()
