/**
 * The sold-out flood measured with wrk (issue 24): a C load generator that takes little of the 2
 * cores, where the lab's Node generator (run.ts) takes the CPU both targets need and pushes every
 * ratio towards 1. The bare fastify server and the service (lua, durability replica, its sale of
 * 100 units sold out before each run) get the same requests from the same wrk script, in paired,
 * interleaved rounds, one request shape at a time:
 *
 *   keyless  the k6 scenario: a random user, no Idempotency-Key
 *   keys     a fresh Idempotency-Key on every request (each refusal recorded under its key)
 *   repeats  repeats of 1,000 keys, each with its own user (a retrying crowd)
 *   mix      a third keyless, a third repeats, a third new keys of new users
 *
 *   npm run bench:checkout:wrk [-- --rounds N --seconds N --connections N --threads N --shapes a,b]
 *     [--profile DIR]   CPU profiles of the service's processes per measured window (see run.ts)
 *     [--route]         a third target in the same rounds: the service with REFUSAL_LANE=false, its
 *                       answers from memory through the fastify route (what the refusal lane buys)
 *     [--route-env K=V,…]  the third target with these settings instead (implies --route), e.g.
 *                       BATCH_HOLD_MS=0: what the group commit buys, paired
 *
 * Per shape: requests/s of each (median over rounds) and the paired ratio, p50/p99 from wrk's
 * --latency, Redis commands and script calls per request on the masters (INFO commandstats), and
 * the cores by process (wrk is in "other"). Writes bench/results/checkout-wrk-<date>-<sha>.json.
 */
import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { basename, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { spread } from '../locks/stats.js'
import { renderWrk } from '../report/render-results.js'
import type { CommandDelta } from './commandstats.js'
import type { CpuShare } from './cpu-share.js'
import { describeEnvironment, loadAverage, writeResults } from './environment.js'
import { connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { type BenchSettings, FULL_SETTINGS, PRODUCT_ID, SOLD_OUT_STOCK, type Target } from './settings.js'
import { MeasureWindow, type Running, resetSale, startTarget, waitQuiet } from './targets.js'

const SHAPES = ['keyless', 'keys', 'repeats', 'mix'] as const
type Shape = (typeof SHAPES)[number]
const SCRIPT = fileURLToPath(new URL('./wrk-checkout.lua', import.meta.url))

class WrkBenchError extends Error {
  readonly code = 'E_BENCH_WRK'
}

interface WrkSample {
  requests: number
  seconds: number
  requestsPerSecond: number
  non2xx: number
  socketErrors: number
  /** wrk --latency's distribution, in ms. */
  p50Ms: number
  p90Ms: number
  p99Ms: number
}

interface WrkRun {
  round: number
  shape: Shape
  target: 'bare' | 'soldout' | 'soldout-route'
  loadAverage1m: number
  sample: WrkSample
  cpu: CpuShare
  commands: CommandDelta | undefined
}

const ms = (value: string, unit: string) => {
  const v = Number(value)
  return unit === 'us' ? v / 1000 : unit === 'ms' ? v : unit === 's' ? v * 1000 : Number.NaN
}

/** wrk's text report → the figures we keep. */
export function parseWrk(out: string): WrkSample {
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? Number.NaN)
  const pct = (p: number) => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(out)
    return m ? ms(m[1]!, m[2]!) : Number.NaN
  }
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m)/.exec(out)
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  return {
    requests: Number(done?.[1] ?? Number.NaN),
    seconds: done ? (done[3] === 'm' ? Number(done[2]) * 60 : ms(done[2]!, done[3]!) / 1000) : Number.NaN,
    requestsPerSecond: num(/Requests\/sec:\s+([\d.]+)/),
    non2xx: num(/Non-2xx or 3xx responses: (\d+)/) || 0,
    socketErrors: errs ? errs.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
    p50Ms: pct(50),
    p90Ms: pct(90),
    p99Ms: pct(99),
  }
}

/** One wrk run of wrk-checkout.lua against `url`'s /v1/checkout; `args`: the script's shape and prefix. */
export function wrk(
  url: string,
  o: { threads: number; connections: number; seconds: number },
  args: string[],
) {
  const r = spawnSync(
    'wrk',
    [
      `-t${o.threads}`,
      `-c${o.connections}`,
      `-d${o.seconds}s`,
      '--latency',
      '--timeout',
      '5s',
      '-s',
      SCRIPT,
      `${url}/v1/checkout`,
      '--',
      ...args,
    ],
    { encoding: 'utf8' },
  )
  if (r.status !== 0) throw new WrkBenchError(`wrk failed (${r.status}): ${r.stderr || r.stdout}`)
  return parseWrk(r.stdout)
}

/** The sale of `SOLD_OUT_STOCK` units, reset, then sold to users 1…n until a refusal says sold out. */
async function sellOut(stack: Running, settings: BenchSettings): Promise<void> {
  await resetSale(stack, settings)
  for (let next = 1; next < 10_000; next += 20) {
    const codes = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        fetch(`${stack.url}/v1/checkout`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ product_id: PRODUCT_ID, user_id: next + i }),
        }).then(async (r) => ((await r.json()) as { error?: { code?: string } }).error?.code),
      ),
    )
    if (codes.includes('SOLD_OUT')) return
  }
  throw new WrkBenchError(`the sale of ${SOLD_OUT_STOCK} units did not sell out`)
}

const SCRIPT_COMMANDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']

/** `BATCH_HOLD_MS=0,REFUSAL_LANE=true` → { BATCH_HOLD_MS: '0', REFUSAL_LANE: 'true' }. */
function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const pair of text.split(',')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(pair.trim())
    if (!m) throw new WrkBenchError(`--route-env: expected NAME=value[,NAME=value…], got '${pair}'`)
    env[m[1]!] = m[2]!
  }
  return env
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      connections: { type: 'string', default: '64' },
      threads: { type: 'string', default: '2' },
      shapes: { type: 'string', default: SHAPES.join(',') },
      postgres: { type: 'string', default: DEFAULT_POSTGRES_URL },
      profile: { type: 'string' },
      route: { type: 'boolean', default: false },
      'route-env': { type: 'string' },
    },
  })
  const n = (flag: string, v: string) => {
    const x = Number(v)
    if (!Number.isInteger(x) || x < 1) throw new WrkBenchError(`--${flag} must be an integer ≥ 1, got ${v}`)
    return x
  }
  const rounds = n('rounds', values.rounds)
  const load = {
    threads: n('threads', values.threads),
    connections: n('connections', values.connections),
    seconds: n('seconds', values.seconds),
  }
  const warmupS = n('warmup', values.warmup)
  const shapes = values.shapes.split(',') as Shape[]
  const bad = shapes.filter((s) => !SHAPES.includes(s))
  if (bad.length > 0)
    throw new WrkBenchError(`unknown --shapes ${bad.join(',')}; choose from ${SHAPES.join(',')}`)
  if (spawnSync('wrk', ['-v'], { encoding: 'utf8' }).error)
    throw new WrkBenchError(
      'wrk is not installed: apt-get install wrk (or node scripts/ensure-tools.mjs wrk as root)',
    )

  const routeEnv = values['route-env'] === undefined ? undefined : parseEnv(values['route-env'])

  const settings: BenchSettings = { ...FULL_SETTINGS }
  const log = (line: string) => process.stderr.write(`${line}\n`)
  const dbs = await connectDatabases(values.postgres)
  const env = describeEnvironment(dbs.version)
  const stacks: Running[] = []
  const runs: WrkRun[] = []
  try {
    const targets: Target[] =
      values.route || routeEnv ? ['bare', 'soldout', 'soldout-route'] : ['bare', 'soldout']
    for (const t of targets) {
      log(`starting ${t}…`)
      stacks.push(
        await startTarget(
          t,
          settings,
          dbs,
          values.profile === undefined ? undefined : resolve(values.profile),
          routeEnv,
        ),
      )
    }
    const bare = stacks[0]!
    for (let round = 1; round <= rounds; round++) {
      for (const [i, shape] of shapes.entries()) {
        // Each round starts with another target (the pairs alternate which goes first).
        const k = (round + i) % stacks.length
        const order = [...stacks.slice(k), ...stacks.slice(0, k)]
        for (const stack of order) {
          await waitQuiet(stacks, settings.drainDeadlineS)
          if (stack !== bare) await sellOut(stack, settings)
          const prefix = randomUUID().slice(0, 8)
          wrk(stack.url, { ...load, seconds: warmupS }, [shape, prefix])
          const loadAverage1m = loadAverage()[0]!
          const window = new MeasureWindow(stack)
          window.begin()
          const sample = wrk(stack.url, load, [shape, prefix])
          const { cpu, commands } = await window.end()
          const target = stack.target as WrkRun['target']
          runs.push({ round, shape, target, loadAverage1m, sample, cpu, commands })
          log(
            `r${round} ${shape.padEnd(8)} ${target.padEnd(8)} ${sample.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${sample.p50Ms} p99 ${sample.p99Ms} ms  non-2xx ${sample.non2xx}/${sample.requests}  cmds/req ${commands ? (commands.mastersTotal / sample.requests).toFixed(3) : '–'}  cores ${JSON.stringify(cpu)}`,
          )
        }
      }
    }
  } finally {
    await Promise.all(stacks.map((s) => s.commands?.close()))
    await Promise.all(stacks.map((s) => s.child.stop()))
    await dbs.dropAll()
  }

  const summary = shapes.map((shape) => {
    const of = (t: WrkRun['target']) => runs.filter((r) => r.shape === shape && r.target === t)
    const b = of('bare')
    const s = of('soldout')
    const route = of('soldout-route')
    const ratioOf = (target: WrkRun[]) =>
      spread(
        target.map(
          (r) => r.sample.requestsPerSecond / b.find((x) => x.round === r.round)!.sample.requestsPerSecond,
        ),
      )
    const p99Ratios = s.map((r) => r.sample.p99Ms / b.find((x) => x.round === r.round)!.sample.p99Ms)
    const perRequest = (f: (r: WrkRun) => number) => spread(s.map((r) => f(r) / r.sample.requests))
    const scripts = (r: WrkRun) => SCRIPT_COMMANDS.reduce((a, c) => a + (r.commands?.masters[c] ?? 0), 0)
    return {
      shape,
      bareRps: spread(b.map((r) => r.sample.requestsPerSecond)),
      soldoutRps: spread(s.map((r) => r.sample.requestsPerSecond)),
      ratio: ratioOf(s),
      bareP99Ms: spread(b.map((r) => r.sample.p99Ms)),
      soldoutP99Ms: spread(s.map((r) => r.sample.p99Ms)),
      p99Ratio: spread(p99Ratios),
      masterCommandsPerRequest: perRequest((r) => r.commands?.mastersTotal ?? Number.NaN),
      scriptCallsPerRequest: perRequest(scripts),
      // Every answer of the sold-out flood is a refusal (409/422), none a sale or an error.
      allRefused: s.every((r) => r.sample.non2xx === r.sample.requests && r.sample.socketErrors === 0),
      // --route: the same service with its answers from memory through the fastify route.
      ...(route.length > 0 && {
        routeRps: spread(route.map((r) => r.sample.requestsPerSecond)),
        routeRatio: ratioOf(route),
        routeP99Ms: spread(route.map((r) => r.sample.p99Ms)),
        ...(route.some((r) => r.commands) && {
          routeScriptCallsPerRequest: spread(
            route.filter((r) => r.commands).map((r) => scripts(r) / r.sample.requests),
          ),
        }),
      }),
      serviceCores: spread(s.map((r) => r.cpu.service ?? 0)),
      bareServiceCores: spread(b.map((r) => r.cpu.service ?? 0)),
    }
  })
  const file = writeResults(
    env,
    false,
    { env, load, warmupS, rounds, routeEnv, runs, summary },
    'checkout-wrk',
  )
  // The same table bench/RESULTS.md's checkout-wrk section is generated with.
  process.stdout.write(`${renderWrk([{ file: basename(file), env, load, rounds, routeEnv, summary }])}\n`)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await main().catch((err: Error) => {
    process.stderr.write(`${err.message}\n`)
    process.exitCode = 1
  })
}
