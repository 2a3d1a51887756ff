/**
 * Worker throughput (issue 15): orders persisted per second by the order worker, from a stream
 * pre-filled with real reservations, into the embedded PGlite (the default of `up`) and into
 * PostgreSQL.
 *
 *   npm run bench:checkout:worker [-- <flags>]     (ensure-redis, build, then this script)
 *   npx tsx bench/checkout/worker.ts [--quick] [--orders N] [--rounds N] [--sql pglite,postgres]
 *
 * One local stack per SQL kind (startStack: Redis Cluster 3+3, the service with 2 instances, SQL,
 * no lock nodes), both up for the whole run, its worker stopped. Each round, per stack (rotated):
 * 1. PUT /admin/sales: a new round of the sale with N units;
 * 2. fill: N checkouts by fresh users (64 in flight, each with an Idempotency-Key, as the
 *    service's clients send) until the sale is sold out: N reservations, N events in the stream;
 * 3. start the worker and poll its flash_sale_orders_persisted_total every 25 ms: the rate is
 *    counted from its first persisted order to the N-th (the process start and connection setup
 *    are reported apart), then GET /admin/sales checks that SQL has all N persisted;
 * 4. stop the worker.
 * The embedded PGlite runs in this process (as in `up`, where it runs in the lab's process); the
 * stack's other parts are child processes. Results go to bench/results/checkout-worker-*.json.
 */
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { type LocalStack, startStack } from '@kunci/flash-sale-lab'
import { Pool } from 'undici'
import { spread } from '../locks/stats.js'
import { CpuSampler, type CpuShare } from './cpu-share.js'
import { describeEnvironment, loadAverage, writeResults } from './environment.js'
import { type BenchDatabases, connectDatabases, DEFAULT_POSTGRES_URL } from './postgres.js'
import { PRODUCT_ID } from './settings.js'

type SqlKind = 'pglite' | 'postgres'
const SQL_KINDS: readonly SqlKind[] = Object.freeze(['pglite', 'postgres'])

/**
 * The goals: issue 15's ≥ 5,000 orders persisted per second with either SQL, raised by issue 24
 * (with money on: wallets, payments, returns) to ≥ 10,000 on PostgreSQL.
 */
export const WORKER_GOAL_PER_SECOND: Readonly<Record<SqlKind, number>> = Object.freeze({
  pglite: 5_000,
  postgres: 10_000,
})

/** A batch's phases as the worker times them (flash_sale_worker_batch_seconds), in table order. */
const PHASES = ['read', 'confirm', 'sql', 'returns', 'sink', 'settle'] as const
type Phase = (typeof PHASES)[number]
/** Seconds and batches per phase over one drain (the worker's process starts at zero). */
type PhaseTimes = Partial<Record<Phase, { seconds: number; batches: number }>>

const HELP = `Usage: npm run bench:checkout:worker -- [options]
       npx tsx bench/checkout/worker.ts [options]        (after npm run build)

Measures the order worker's throughput (orders persisted per second) from a stream pre-filled
with N real reservations, into PGlite and PostgreSQL, and writes
bench/results/checkout-worker-<date>-<sha>.json.

Options:
  --quick            1 round of 5,000 orders (numbers not comparable)
  --orders N         reservations per round (default 20000)
  --rounds N         rounds per SQL kind (default 3)
  --sql a,b          subset of ${SQL_KINDS.join(',')} (default both)
  --postgres URL     PostgreSQL server; a fresh database is created and dropped
                     (default ${DEFAULT_POSTGRES_URL})
  --help             this text
`

interface WorkerRun {
  round: number
  sql: SqlKind
  orders: number
  loadAverage1m: number
  /** Reservations per second while filling the stream (the service, for reference). */
  fillPerSecond: number
  /** From the worker's spawn to its first persisted order (process start, connections, group). */
  startupMs: number
  /** From the first persisted order to the N-th. */
  drainMs: number
  /** Orders persisted per second over drainMs (the first observation's orders excluded). */
  perSecond: number
  /** SQL's count after the drain (GET /admin/sales: persisted). */
  persisted: number
  /** Cores from the first persisted order to the N-th; 'loadgen' is this process, where the embedded PGlite runs. */
  cpu: CpuShare
  /** Where the batches' time went, over the whole drain (first batch included). */
  phases: PhaseTimes
}

const integer = (flag: string, v: string | undefined, fallback: number) => {
  if (v === undefined) return fallback
  const n = Number(v)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer, got ${v}`)
  return n
}

async function putSale(stack: LocalStack, stock: number): Promise<void> {
  await stack.putSale({ productId: String(PRODUCT_ID), stock, perUserLimit: 1 })
}

/** N checkouts by fresh users, `concurrency` in flight, until N are sold; returns sales/s. */
async function fill(url: string, orders: number, concurrency = 64): Promise<number> {
  const pool = new Pool(url, { connections: concurrency })
  const userBase = Math.floor(Math.random() * 1e9) * 1000
  let next = 0
  let sold = 0
  let soldOut = false
  const started = performance.now()
  const one = async (): Promise<void> => {
    while (!soldOut && next < orders * 2) {
      const user = userBase + next++
      const res = await pool.request({
        path: '/v1/checkout',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify({ product_id: PRODUCT_ID, user_id: user }),
      })
      const text = await res.body.text()
      if (res.statusCode === 200 || res.statusCode === 202) sold++
      else if (text.includes('SOLD_OUT')) soldOut = true
      else if (res.statusCode !== 429 && res.statusCode !== 503)
        throw new Error(`fill: ${res.statusCode} ${text}`)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, one))
  await pool.close()
  if (sold !== orders) throw new Error(`fill: sold ${sold} of ${orders}`)
  return Math.round(sold / ((performance.now() - started) / 1000))
}

/** The worker's flash_sale_worker_batch_seconds sums and counts, by phase. */
async function phaseTimes(metricsUrl: string): Promise<PhaseTimes> {
  const text = await fetch(metricsUrl).then((r) => r.text())
  const times: PhaseTimes = {}
  const re = /^flash_sale_worker_batch_seconds_(sum|count)\{phase="(\w+)"\} (\S+)$/gm
  for (const [, what, phase, value] of text.matchAll(re)) {
    if (!PHASES.includes(phase as Phase)) continue
    const t = (times[phase as Phase] ??= { seconds: 0, batches: 0 })
    if (what === 'sum') t.seconds = Number(value)
    else t.batches = Number(value)
  }
  return times
}

/**
 * How long to wait before the next scrape of the worker's /metrics. A scrape costs the worker CPU
 * (prom-client renders every metric, the event-loop histograms included): at one per 25 ms it
 * was ~7 % of the worker's CPU in a perf profile of the drain (2026-12-06), taken from what is
 * measured. Fine-grained where the time is read (until the first order; when the end is near),
 * coarse in between: at most half the time the rest should take at the rate so far, 25–250 ms.
 */
function pollDelayMs(
  first: { at: number; count: number } | undefined,
  last: { at: number; count: number },
  orders: number,
): number {
  if (first === undefined || last.count <= first.count) return 25
  const perMs = (last.count - first.count) / Math.max(1, last.at - first.at)
  const restMs = (orders - last.count) / perMs
  return Math.min(250, Math.max(25, Math.floor(restMs / 2)))
}

async function persistedCounter(metricsUrl: string): Promise<number> {
  const text = await fetch(metricsUrl).then(
    (r) => r.text(),
    () => '',
  )
  let sum = 0
  for (const line of text.split('\n')) {
    if (line.startsWith('flash_sale_orders_persisted_total')) {
      const v = Number(line.slice(line.lastIndexOf(' ') + 1))
      if (Number.isFinite(v)) sum += v
    }
  }
  return sum
}

async function sqlPersisted(stack: LocalStack): Promise<number> {
  const res = await fetch(`${stack.url}/admin/sales/${PRODUCT_ID}`, {
    headers: { authorization: `Bearer ${stack.adminToken}` },
  })
  const body = (await res.json()) as { persisted?: number }
  return body.persisted ?? Number.NaN
}

async function drain(
  stack: LocalStack,
  orders: number,
  deadlineMs = 300_000,
): Promise<Omit<WorkerRun, 'round' | 'sql' | 'orders' | 'loadAverage1m' | 'fillPerSecond'>> {
  const sampler = new CpuSampler()
  const spawned = performance.now()
  stack.worker.start()
  let first: { at: number; count: number } | undefined
  let last = { at: spawned, count: 0 }
  while (last.count < orders) {
    if (performance.now() - spawned > deadlineMs)
      throw new Error(`the worker persisted ${last.count} of ${orders} in ${deadlineMs} ms`)
    if (!stack.worker.running) throw new Error(`the worker exited:\n${stack.worker.output.join('')}`)
    await sleep(pollDelayMs(first, last, orders))
    const count = await persistedCounter(stack.workerMetricsUrl)
    const at = performance.now()
    if (count > 0 && first === undefined) {
      first = { at, count }
      // The CPU of the drain, not of the worker's start (module loading, connections).
      sampler.start()
    }
    last = { at, count }
  }
  // This process's children: the worker, the service, the Redis nodes (PGlite runs in here).
  const cpu = sampler.stop([process.pid])
  const phases = await phaseTimes(stack.workerMetricsUrl)
  await stack.worker.stop()
  const f = first ?? last
  const drainMs = last.at - f.at
  return {
    startupMs: Math.round(f.at - spawned),
    drainMs: Math.round(drainMs),
    perSecond: drainMs > 0 ? Math.round(((last.count - f.count) * 1000) / drainMs) : Number.NaN,
    persisted: await sqlPersisted(stack),
    cpu,
    phases,
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      orders: { type: 'string' },
      rounds: { type: 'string' },
      sql: { type: 'string' },
      postgres: { type: 'string', default: DEFAULT_POSTGRES_URL },
      help: { type: 'boolean', default: false },
    },
  })
  if (values.help) {
    process.stdout.write(HELP)
    return
  }
  const orders = integer('--orders', values.orders, values.quick ? 5_000 : 20_000)
  const rounds = integer('--rounds', values.rounds, values.quick ? 1 : 3)
  const kinds = values.sql === undefined ? [...SQL_KINDS] : (values.sql.split(',') as SqlKind[])
  if (kinds.some((k) => !SQL_KINDS.includes(k))) {
    process.stderr.write(`--sql: choose from ${SQL_KINDS.join(',')}\n\n${HELP}`)
    process.exitCode = 2
    return
  }
  const log = (line: string) => process.stderr.write(`${line}\n`)
  const dbs: BenchDatabases = await connectDatabases(values.postgres)
  const env = describeEnvironment(dbs.version)
  log(
    `worker bench: ${kinds.join(', ')}; ${rounds} round(s) of ${orders} orders; load average ${env.loadAverageAtStart.join(' ')}`,
  )
  const stacks = new Map<SqlKind, LocalStack>()
  const runs: WorkerRun[] = []
  try {
    for (const kind of kinds) {
      log(`starting the ${kind} stack…`)
      const databaseUrl = kind === 'postgres' ? await dbs.create('worker') : undefined
      stacks.set(
        kind,
        await startStack({
          instances: 2,
          port: 0,
          lockNodes: false,
          worker: false,
          ...(databaseUrl && { databaseUrl }),
        }),
      )
    }
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? kinds : [...kinds].reverse()
      for (const sql of order) {
        const stack = stacks.get(sql)!
        await putSale(stack, orders)
        const fillPerSecond = await fill(stack.url, orders)
        const loadAverage1m = loadAverage()[0]!
        const run = { round, sql, orders, loadAverage1m, fillPerSecond, ...(await drain(stack, orders)) }
        runs.push(run)
        log(
          `r${round} ${sql.padEnd(8)} ${String(run.perSecond).padStart(6)} orders/s  (drain ${run.drainMs} ms, startup ${run.startupMs} ms, SQL persisted ${run.persisted}/${orders}, fill ${fillPerSecond}/s)  load ${loadAverage1m}  cores ${JSON.stringify(run.cpu)}`,
        )
      }
    }
  } finally {
    log('stopping…')
    for (const s of stacks.values()) await s.stop()
    await dbs.dropAll()
  }
  const lines = [
    `Worker throughput: ${rounds} round(s) of ${orders} reservations per SQL kind, medians (min–max); load average at start ${env.loadAverageAtStart.join(' / ')}.`,
    '',
    '| SQL | orders persisted/s | orders per CPU-second (worker + SQL) | drain s | worker start → first order ms | reservations/s while filling | cores: worker | bench process (PGlite) | postgres | redis | other | goal |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  ]
  const r = (vs: number[], d = 0) => {
    const s = spread(vs)
    const f = (v: number) => v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })
    return `${f(s.median)} (${f(s.min)}–${f(s.max)})`
  }
  // What the worker and its SQL did per CPU-second they got: steadier than the rate on a shared
  // machine. PGlite's share is this process's (it also polls the metrics, a small part).
  const perCore = (x: WorkerRun) =>
    x.perSecond /
    Math.max(0.01, (x.cpu.worker ?? 0) + ((x.sql === 'pglite' ? x.cpu.loadgen : x.cpu.postgres) ?? 0))
  for (const sql of kinds) {
    const rs = runs.filter((x) => x.sql === sql)
    if (rs.length === 0) continue
    const med = spread(rs.map((x) => x.perSecond)).median
    const core = (k: keyof CpuShare) => spread(rs.map((x) => x.cpu[k] ?? 0)).median.toFixed(2)
    lines.push(
      `| ${sql} | ${r(rs.map((x) => x.perSecond))} | ${r(rs.map(perCore))} | ${r(
        rs.map((x) => x.drainMs / 1000),
        2,
      )} | ${r(rs.map((x) => x.startupMs))} | ${r(rs.map((x) => x.fillPerSecond))} | ${core('worker')} | ${core('loadgen')} | ${core('postgres')} | ${core('redis')} | ${core('other')} | ≥ ${WORKER_GOAL_PER_SECOND[sql].toLocaleString('en-US')}/s ${med >= WORKER_GOAL_PER_SECOND[sql] ? 'met' : 'missed'} |`,
    )
  }
  lines.push('', ...phaseTable(kinds, runs))
  const file = writeResults(env, values.quick, { env, orders, rounds, runs }, 'checkout-worker')
  process.stdout.write(`${lines.join('\n')}\n\nRaw samples: \`${file}\`\n`)
}

/**
 * Where a batch's time goes: ms per batch in each phase (medians over rounds) and each phase's
 * share of the batches' time. `sink` holds `sql` and `returns` (SQL's transaction, then the units
 * given back to Redis); the shares are of read + confirm + sink + settle. The worker reads (and
 * confirms) the next batch and acknowledges the last one while a batch is in the sink, so those
 * phases overlap: batch time ÷ drain time above 1 is how much (1 = one after another).
 */
function phaseTable(kinds: readonly SqlKind[], runs: readonly WorkerRun[]): string[] {
  const top: Phase[] = ['read', 'confirm', 'sink', 'settle']
  const lines = [
    "Where a batch's time goes (flash_sale_worker_batch_seconds, the worker's own timing): ms per batch, medians over rounds; share of the batch's time in parentheses. Read, confirm and settle overlap the sink (read ahead): batch time ÷ drain time above 1 says by how much.",
    '',
    `| SQL | batches | orders per batch | ${PHASES.join(' | ')} | batch ms | batch time ÷ drain time |`,
    `|---|---:|---:|${PHASES.map(() => '---:').join('|')}|---:|---:|`,
  ]
  for (const sql of kinds) {
    const rs = runs.filter((x) => x.sql === sql)
    if (rs.length === 0) continue
    const med = (f: (x: WorkerRun) => number) => spread(rs.map(f)).median
    const batches = (x: WorkerRun) => x.phases.sink?.batches ?? 0
    const ms = (x: WorkerRun, p: Phase) => ((x.phases[p]?.seconds ?? 0) * 1000) / Math.max(1, batches(x))
    const total = (x: WorkerRun) => top.reduce((a, p) => a + ms(x, p), 0)
    const cells = PHASES.map((p) => {
      const share = med((x) => ms(x, p) / Math.max(1e-9, total(x)))
      return `${med((x) => ms(x, p)).toFixed(2)} (${(share * 100).toFixed(0)} %)`
    })
    lines.push(
      `| ${sql} | ${med(batches)} | ${med((x) => x.orders / Math.max(1, batches(x))).toFixed(0)} | ${cells.join(' | ')} | ${med(total).toFixed(2)} | ${med((x) => (total(x) * batches(x)) / Math.max(1, x.drainMs)).toFixed(2)} |`,
    )
  }
  return lines
}

await main()
