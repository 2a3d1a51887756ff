// A benchmark target's stack (the bare server, or a service stack in its own host process) and
// the measured window of one run on it: shared by the closed/open-loop bench (run.ts) and the wrk
// bench (wrk.ts).
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { StackOptions } from '@kunci/flash-sale-lab'
import { findFreePort } from '@kunci/topology'
import { type BenchChild, startChild } from './children.js'
import { CommandCounter, type CommandDelta, type CommandSnapshot, type RedisAccess } from './commandstats.js'
import { CpuSampler, type CpuShare, descendantPids } from './cpu-share.js'
import type { BenchDatabases } from './postgres.js'
import {
  type BenchSettings,
  isSoldOut,
  PRODUCT_ID,
  SOLD_OUT_PER_USER_LIMIT,
  SOLD_OUT_STOCK,
  type Target,
} from './settings.js'

export interface Running {
  target: Target
  /** Its service processes write a CPU profile of each measured window (--profile). */
  profiled: boolean
  url: string
  workerMetricsUrl: string | undefined
  adminToken: string | undefined
  commands: CommandCounter | undefined
  child: BenchChild<{ ready: true }>
}

interface StackReady {
  ready: true
  url: string
  workerMetricsUrl: string
  adminToken: string
  redis: RedisAccess
}

function saleOf(target: Target, settings: BenchSettings): NonNullable<StackOptions['sale']> {
  return isSoldOut(target)
    ? { productId: String(PRODUCT_ID), stock: SOLD_OUT_STOCK, perUserLimit: SOLD_OUT_PER_USER_LIMIT }
    : { productId: String(PRODUCT_ID), stock: settings.stock, perUserLimit: settings.perUserLimit }
}

function stackOptions(
  target: Target,
  settings: BenchSettings,
  databaseUrl: string,
  profileDir: string | undefined,
  routeEnv: Record<string, string> | undefined,
): StackOptions {
  const redlock = target === 'redlock'
  const env: Record<string, string> = {}
  if (target === 'soldout-nolocal') env.LOCAL_ANSWERS = 'false'
  // soldout-route: the lane off, or the service's settings a comparison asks for (wrk --route-env).
  if (target === 'soldout-route') Object.assign(env, routeEnv ?? { REFUSAL_LANE: 'false' })
  // Every process of the service (primary and instances) profiles each measured window
  // (SIGUSR2 at its start and end, see MeasureWindow); the worker loads the preload too, idle.
  if (profileDir && PROFILED.includes(target)) {
    env.NODE_OPTIONS = `--import=${fileURLToPath(new URL('./cpu-profile-preload.mjs', import.meta.url))}`
    env.CPU_PROFILE_DIR = `${profileDir}/${target}`
  }
  return {
    strategy: redlock ? 'redlock' : 'lua',
    durability: target === 'lua-none' ? 'none' : 'replica',
    instances: settings.instances,
    port: 0,
    databaseUrl,
    lockNodes: redlock,
    worker: target !== 'lua-noworker',
    sale: saleOf(target, settings),
    env,
  }
}

/** The targets whose processes `--profile` profiles: the sold-out flood and the reservations. */
const PROFILED: readonly Target[] = Object.freeze(['soldout', 'lua-replica'])

/** PUT /admin/sales/:id: a new round of the sale, its full stock again (a sold-out target's reset). */
export async function resetSale(r: Running, settings: BenchSettings): Promise<void> {
  const sale = saleOf(r.target, settings)
  // A 503 says the sale's replica has not acknowledged yet (it may still be applying a run's
  // writes, half a million recorded keys after a keyed flood): repeat it, as the answer asks.
  const deadline = Date.now() + 60_000
  for (;;) {
    const res = await fetch(`${r.url}/admin/sales/${sale.productId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${r.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stock: sale.stock, price: 49.99, per_user_limit: sale.perUserLimit }),
    })
    if (res.ok) return
    const text = await res.text()
    if (res.status !== 503 || Date.now() > deadline)
      throw new Error(`reset of ${r.target}'s sale: ${res.status} ${text}`)
    await sleep(1_000 * Number(res.headers.get('retry-after') ?? 1))
  }
}

export async function startTarget(
  target: Target,
  settings: BenchSettings,
  dbs: BenchDatabases,
  profileDir: string | undefined,
  routeEnv?: Record<string, string>,
): Promise<Running> {
  if (target === 'bare') {
    const port = await findFreePort()
    const child = await startChild<{ ready: true }>(
      'bare',
      'bare-server.ts',
      [String(port), String(settings.instances)],
      60_000,
    )
    return {
      target,
      profiled: false,
      url: `http://127.0.0.1:${port}`,
      workerMetricsUrl: undefined,
      adminToken: undefined,
      commands: undefined,
      child,
    }
  }
  const options = stackOptions(target, settings, await dbs.create(target), profileDir, routeEnv)
  const child = await startChild<StackReady>(target, 'stack-host.ts', [JSON.stringify(options)], 180_000)
  const workerMetricsUrl = options.worker === false ? undefined : child.ready.workerMetricsUrl
  return {
    target,
    profiled: profileDir !== undefined && PROFILED.includes(target),
    url: child.ready.url,
    workerMetricsUrl,
    adminToken: child.ready.adminToken,
    commands: new CommandCounter(child.ready.redis),
    child,
  }
}

/**
 * The measured window of one run: CPU and Redis commands from its start (the end of the warm-up,
 * `begin`) to `end` (the load generator's last answer).
 */
export class MeasureWindow {
  readonly #sampler = new CpuSampler()
  readonly #target: Running
  #commandsAtStart: Promise<CommandSnapshot> | undefined

  constructor(target: Running) {
    this.#target = target
  }

  begin = (): void => {
    this.#sampler.start()
    this.#commandsAtStart = this.#target.commands?.snapshot()
    this.#toggleProfiles()
  }

  async end(): Promise<{ cpu: CpuShare; commands: CommandDelta | undefined }> {
    const pid = this.#target.child.pid
    const cpu = this.#sampler.stop(pid === undefined ? [] : [pid])
    this.#toggleProfiles()
    const start = await this.#commandsAtStart
    const end = await this.#target.commands?.snapshot()
    return { cpu, commands: start && end ? CommandCounter.delta(start, end) : undefined }
  }

  /** SIGUSR2 to the service's processes: cpu-profile-preload.mjs starts or stops (and writes) a profile. */
  #toggleProfiles(): void {
    const root = this.#target.child.pid
    if (!this.#target.profiled || root === undefined) return
    for (const pid of descendantPids(root, 'main.js serve')) {
      try {
        process.kill(pid, 'SIGUSR2')
      } catch {
        // It exited.
      }
    }
  }
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
export async function waitQuiet(running: Running[], deadlineS: number): Promise<number> {
  const deadline = Date.now() + deadlineS * 1000
  for (;;) {
    const left = (
      await Promise.all(running.flatMap((r) => (r.workerMetricsUrl ? [backlog(r.workerMetricsUrl)] : [])))
    ).reduce((a, b) => a + b, 0)
    if (left === 0 || Date.now() > deadline) return left
    await sleep(1_000)
  }
}
