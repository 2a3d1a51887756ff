/**
 * Checkout benchmark (issues 6 and 15): the flash-sale service's `lua` strategy (durability
 * replica and none) and `redlock` strategy against a bare fastify server answering a constant, in
 * the same process model (node:cluster, the same number of instances), driven by the same load
 * generator in the same run, in interleaved rounds (A B C D, B C D A, …).
 *
 *   npm run bench:checkout [-- <flags>]          (ensure-redis, build, then this script)
 *   npx tsx bench/checkout/run.ts [--quick] [--rounds N] [--connections N] [--instances N]
 *     [--phases reserve,soldout,soldout-nolocal,soldout-keys]
 *     [--targets bare,lua-replica,lua-none,redlock] [--no-open] [--postgres URL] [--profile DIR]
 *
 * Phases: `reserve` (issue 6: the sale has a stock that does not run out and users are drawn
 * from a huge range, so the answers are sales) runs `--targets`; `soldout` (issue 15: a sale of
 * 100 units reset before each run and sold out by the crowd during the warm-up, then the measured
 * window is the flood of refusals, with the k6 scenario's request shape) and its diagnostics
 * `soldout-nolocal` (LOCAL_ANSWERS=false) and `soldout-keys` (an Idempotency-Key per request) are
 * one target each. The bare server runs in every round whatever the phases.
 *
 * 1. Closed loop (maximum throughput): every target, every round.
 * 2. Open loop: at a fixed rate of half of each service target's closed-loop median (the bare
 *    server at lua-replica's and at soldout's rate, as floors), latency from the scheduled send time.
 * Each run's measured window (after the warm-up) also gets the CPU split by process and the Redis
 * commands of the target's cluster (INFO commandstats, masters and replicas apart).
 * Before each run, the bench waits until every stack's worker has persisted the previous runs'
 * orders (stream lag + pending = 0), so one target's backlog does not slow the next one down.
 *
 * Each stack (Redis Cluster 3+3, SQL on a fresh PostgreSQL database, service, worker; the 5 lock
 * nodes for redlock) runs in its own host process; the load generator is this process.
 */
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { spread } from '../locks/stats.js'
import { runClosedLoop } from './closed-loop.js'
import { describeEnvironment, loadAverage, writeResults } from './environment.js'
import { runOpenLoop } from './open-loop.js'
import { connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { type ClosedRun, formatReport, type OpenRun, summarize } from './report.js'
import {
  type BenchSettings,
  DEFAULT_PHASES,
  FULL_SETTINGS,
  isSoldOut,
  K6_USER_ID_MAX,
  OPEN_TARGETS,
  PHASES,
  type Phase,
  PRODUCT_ID,
  QUICK_SETTINGS,
  RATE_REFERENCES,
  RESERVE_TARGETS,
  shapeOf,
  type Target,
} from './settings.js'
import { MeasureWindow, type Running, resetSale, startTarget, waitQuiet } from './targets.js'

const HELP = `Usage: npm run bench:checkout -- [options]
       npx tsx bench/checkout/run.ts [options]        (after npm run build)

Measures the flash-sale checkout (reservations: lua replica, lua none, redlock; a sold-out
sale's flood: soldout and its diagnostics) against a bare fastify server in interleaved rounds
and writes bench/results/checkout-<date>-<sha>.json. The worker's throughput is another script:
npm run bench:checkout:worker.

Options:
  --quick              short smoke run (1 round, 3 s runs); numbers are not comparable
  --rounds N           interleaved rounds (default ${FULL_SETTINGS.rounds})
  --connections N      closed-loop connections (default ${FULL_SETTINGS.connections})
  --instances N        processes per target, node:cluster (default ${FULL_SETTINGS.instances})
  --seconds N          measured seconds of each run (default ${FULL_SETTINGS.closedSeconds})
  --phases a,b,...     subset of ${PHASES.join(',')} (default ${DEFAULT_PHASES.join(',')});
                       soldout: 100 units sold out in the warm-up, then the refusals' flood;
                       soldout-nolocal: the same with LOCAL_ANSWERS=false (diagnostic);
                       soldout-keys: the same with an Idempotency-Key per request
  --targets a,b,...    reserve phase: subset of ${RESERVE_TARGETS.join(',')} (default all;
                       lua-noworker is lua-replica without the order worker, a diagnostic)
  --no-open            skip the open-loop (latency at half the maximum rate) part
  --postgres URL       PostgreSQL server; a fresh database per stack is created and dropped
                       (default ${DEFAULT_POSTGRES_URL})
  --profile DIR        CPU profiles (V8 sampling, node:inspector) of soldout's and
                       lua-replica's service processes, one per measured window, in
                       DIR/<target>/; summarize with
                       npx tsx bench/checkout/profile-summary.ts DIR/<target>
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
  profileDir: string | undefined
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
      phases: { type: 'string' },
      profile: { type: 'string' },
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
  const phases = values.phases === undefined ? [...DEFAULT_PHASES] : (values.phases.split(',') as Phase[])
  const badPhases = phases.filter((p) => !PHASES.includes(p))
  if (badPhases.length > 0)
    throw new BenchUsageError(`unknown --phases ${badPhases.join(',')}; choose from ${PHASES.join(',')}`)
  const reserve =
    values.targets === undefined ? [...RESERVE_TARGETS] : (values.targets.split(',') as Target[])
  const unknown = reserve.filter((t) => !RESERVE_TARGETS.includes(t))
  if (unknown.length > 0)
    throw new BenchUsageError(
      `unknown --targets ${unknown.join(',')}; choose from ${RESERVE_TARGETS.join(',')}`,
    )
  const targets: Target[] = ['bare']
  if (phases.includes('reserve')) targets.push(...reserve.filter((t) => t !== 'bare'))
  for (const p of phases) if (p !== 'reserve') targets.push(p)
  return {
    settings,
    quick: values.quick,
    targets,
    open: !values['no-open'],
    postgres: values.postgres,
    profileDir: values.profile === undefined ? undefined : resolve(values.profile),
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
    await Promise.all(running.map((r) => r.commands?.close()))
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
      running.push(await startTarget(t, settings, dbs, cli.profileDir))
      if (interrupted) return
    }
    const byTarget = (t: Target) => running.find((r) => r.target === t)!

    for (let round = 1; round <= settings.rounds && !interrupted; round++) {
      for (const t of rotate(targets, round - 1)) {
        if (interrupted) break
        const backlogAtStart = await waitQuiet(running, settings.drainDeadlineS)
        // A sold-out target sells its 100 units again, to the crowd, during the warm-up.
        if (isSoldOut(t)) await resetSale(byTarget(t), settings)
        const loadAverage1m = loadAverage()[0]!
        const window = new MeasureWindow(byTarget(t))
        const shape = shapeOf(t)
        const sample = await runClosedLoop({
          url: byTarget(t).url,
          connections: settings.connections,
          warmupS: settings.closedWarmupS,
          seconds: settings.closedSeconds,
          productId: PRODUCT_ID,
          userIdMin: 1,
          userIdMax: shape === 'fresh' ? settings.userIdMax : K6_USER_ID_MAX,
          idempotencyKeys: shape !== 'k6',
          onMeasureStart: window.begin,
        })
        const { cpu, commands } = await window.end()
        closed.push({ round, target: t, loadAverage1m, backlogAtStart, cpu, commands, sample })
        const perRequest = (n: number) => (n / Math.max(1, sample.measuredRequests)).toFixed(2)
        log(
          `closed r${round} ${t.padEnd(15)} ${String(sample.requestsPerSecond).padStart(6)} req/s  sales ${sample.salesPerSecond}/s  p50 ${sample.latency.p50Ms.toFixed(2)} p99 ${sample.latency.p99Ms.toFixed(2)} ms  ${JSON.stringify(sample.byStatus)}  redis cmds/req ${commands ? `${perRequest(commands.mastersTotal)} + ${perRequest(commands.replicasTotal)} (replicas)` : '–'}  load ${loadAverage1m}  cores ${JSON.stringify(cpu)}`,
        )
      }
    }

    const median = (t: Target) =>
      spread(closed.filter((c) => c.target === t).map((c) => c.sample.requestsPerSecond)).median
    // Each service target at half its own maximum; the bare server at each reference's rate.
    const openRuns: { label: string; target: Target; rateOf: Target }[] = cli.open
      ? [
          ...RATE_REFERENCES.filter((r) => targets.includes(r)).map((r) => ({
            label: `bare@${r}`,
            target: 'bare' as Target,
            rateOf: r,
          })),
          ...OPEN_TARGETS.filter((t) => targets.includes(t)).map((t) => ({ label: t, target: t, rateOf: t })),
        ]
      : []
    const rateOf = (t: Target) => Math.max(1, Math.round(settings.openRateShare * median(t)))
    for (let round = 1; round <= settings.rounds && !interrupted && openRuns.length > 0; round++) {
      for (const o of rotate(openRuns, round - 1)) {
        if (interrupted) break
        const t = o.target
        const backlogAtStart = await waitQuiet(running, settings.drainDeadlineS)
        const loadAverage1m = loadAverage()[0]!
        const window = new MeasureWindow(byTarget(t))
        const shape = shapeOf(o.rateOf)
        // A sold-out target stays sold out after its closed-loop runs: the open loop is its flood.
        const sample = await runOpenLoop({
          url: byTarget(t).url,
          rate: rateOf(o.rateOf),
          warmupS: settings.openWarmupS,
          seconds: settings.openSeconds,
          connections: settings.openConnections,
          productId: PRODUCT_ID,
          users: shape === 'fresh' ? 'fresh' : 'random',
          userIdMax: shape === 'fresh' ? settings.userIdMax : K6_USER_ID_MAX,
          idempotencyKeys: shape !== 'k6',
          onMeasureStart: window.begin,
        })
        const { cpu, commands } = await window.end()
        open.push({ round, target: t, label: o.label, loadAverage1m, backlogAtStart, cpu, commands, sample })
        log(
          `open   r${round} ${o.label.padEnd(15)} ${sample.rate}/s  p50 ${sample.latency.p50Ms} p99 ${sample.latency.p99Ms} p99.9 ${sample.latency.p999Ms} ms  send lag p99 ${sample.sendLag.p99Ms} ms  ${JSON.stringify(sample.byStatus)}  load ${loadAverage1m}`,
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
