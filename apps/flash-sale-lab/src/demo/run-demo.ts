// npm run demo: the flash-sale checkout under a ramped crowd and real faults, once per strategy
// (naive, redlock, lua), each on its own local stack (3+3 Redis Cluster, 5 lock nodes, SQL,
// 2 service processes, a worker). Ends with a table per strategy, a verdict and the HTML report.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { connectDb, type Db } from '@kunci/flash-sale'
import { runChaos } from '@kunci/topology'
import { formatCrowd } from '../load/crowd-figures.js'
import type { LoadResult } from '../load/result.js'
import { runLoad } from '../load/run-load.js'
import { writeReport } from '../report/render-report.js'
import {
  type PhaseReport,
  REPORT_INPUT_VERSION,
  type ReportInput,
  type RoomComparison,
  type StrategyReport,
} from '../report/report-input.js'
import { type LocalStack, startStack } from '../stack/local-stack.js'
import { checkPhase, readLedger } from './checker.js'
import { crowdLoadOptions, crowdRun, putPhaseSale, roomComparison, roomRefusal } from './crowd-phases.js'
import {
  type DemoOptions,
  type DemoStrategy,
  type ResolvedDemoOptions,
  resolveDemoOptions,
} from './demo-options.js'
import { runMeta } from './meta.js'
import { fundWallets, moneyLoadOptions, putMoneySale, settleAndCheck } from './money-phases.js'
import { startSampler, waitForDrain } from './phase-watch.js'
import { formatDemoProgress, type ProgressState } from './progress-line.js'
import { faultHandlers, type PhasePlan, phasePlans, selectPhases } from './scenario.js'
import { openSqlTarget } from './sql-target.js'
import { formatMoneyLine } from './summary-table.js'
import { demoVerdict, type PhaseCheckFigures, summaryRow } from './verdict.js'

export interface DemoHooks {
  /** Ctrl-C: the load stops, pending fault undos run at once, the stacks stop. */
  signal?: AbortSignal
  /** Events: stacks starting, faults, phase results. */
  log?: (line: string) => void
  /** The live line, once a second. */
  progress?: (line: string) => void
}

export interface DemoResult {
  input: ReportInput
  /** Path of index.html. */
  reportFile: string
  /** lua and redlock held every invariant (and the run was not aborted). */
  ok: boolean
  aborted: boolean
}

export const STRATEGY_DESCRIPTIONS: Readonly<Record<DemoStrategy, string>> = Object.freeze({
  naive: 'GET the stock, then SET stock − 1: a read-modify-write race, shown for contrast (oversells)',
  redlock: 'kunci Redlock on 5 independent nodes around one SQL transaction, writes fenced by the lock token',
  lua: "reserve.lua: one atomic script on the sale's Redis Cluster slot + WAIT 1; orders through a stream to SQL",
})

// A killed worker's events are claimed 2 s after its death instead of 15 s, so the demo's drain
// does not wait out the production idle time; the event-loop shed threshold is raised because the
// demo runs load generator, 2 instances, a worker and 11 redis-servers on one small machine. No
// request is in flight when a stack stops, so its drain need not wait 10 s for idle connections.
// Wallets start at the lab stack's LAB_WALLET_BALANCE (production: 0), so the phases before the
// money ones buy as they always did; the money phases set every balance they use.
const DEMO_ENV = Object.freeze({
  CLAIM_IDLE_MS: '2000',
  MAX_EVENT_LOOP_DELAY_MS: '2000',
  DRAIN_TIMEOUT_MS: '1000',
})

/**
 * After the load: waits for the worker (and for a money phase the expiry sweeper), then checks the
 * answers against SQL: the money checker's books for a money phase, else checkPhase.
 */
async function settlePhase(
  db: Db,
  stack: LocalStack,
  plan: PhasePlan,
  load: LoadResult,
  setCents: number,
  options: ResolvedDemoOptions,
  hooks: DemoHooks,
) {
  if (plan.money) {
    const r = await settleAndCheck(db, stack, plan, load, setCents, options.drainTimeoutMs, hooks.signal)
    return { check: r.check satisfies PhaseCheckFigures, drained: r.drained, money: r.check.money }
  }
  const answered200 = new Set(load.orders.filter((o) => o.status === 200).map((o) => o.order_id)).size
  const drained = await waitForDrain(
    db,
    stack,
    plan.productId,
    answered200,
    options.drainTimeoutMs,
    hooks.signal,
  )
  const check = checkPhase(load, await readLedger(db, String(plan.productId)), plan.stock)
  return { check: check satisfies PhaseCheckFigures, drained, money: undefined }
}

async function runPhase(
  strategy: DemoStrategy,
  plan: PhasePlan,
  stack: LocalStack,
  db: Db,
  options: ResolvedDemoOptions,
  hooks: DemoHooks,
): Promise<PhaseReport> {
  const log = hooks.log ?? (() => {})
  // A money phase's sale is already there (runStrategy asked whether the strategy takes it).
  const sale = plan.money ? undefined : await putPhaseSale(stack, plan)
  const setCents = plan.money ? await fundWallets(stack, plan) : 0
  const firstUser = plan.money?.userIdMin ?? 1
  log(
    `${strategy}: ${plan.label}: product ${plan.productId}, ${plan.stock} units, users ${firstUser}..${firstUser + plan.users - 1}`,
  )
  const state: ProgressState = { strategy, phase: plan.id, faults: [] }
  const sampler = startSampler(stack, plan.productId, state)
  const active = new Map<number, string>()
  const chaosStartedAtMs = Date.now()
  const chaos = runChaos({
    schedule: plan.schedule,
    faults: faultHandlers(stack, plan.productId),
    startedAt: chaosStartedAtMs,
    ...(hooks.signal ? { signal: hooks.signal } : {}),
    onEvent: ({ type, event }) => {
      const t = `${(event.startedMs / 1000).toFixed(1)}s`
      if (type === 'start') {
        active.set(event.at, event.label)
        log(`${strategy}: ${t} fault: ${event.label}`)
      } else if (type === 'end') {
        active.delete(event.at)
        const took = ((event.endedMs ?? event.startedMs) - event.startedMs) / 1000
        log(
          `${strategy}: fault over after ${took.toFixed(1)} s: ${event.label}${event.error ? ` (error: ${event.error})` : ''}`,
        )
      }
      state.faults = [...active.values()]
    },
  })
  const loadRun = runLoad(
    {
      url: stack.url,
      stages: plan.stages,
      productId: plan.productId,
      userIdMin: 1,
      userIdMax: plan.users,
      repeatRatio: plan.repeatRatio,
      doubleClickRatio: plan.doubleClickRatio,
      ...(plan.retryStorm
        ? { maxRetries: Number.POSITIVE_INFINITY, retryDelayMs: [100, 300] as [number, number] }
        : {}),
      ...crowdLoadOptions(plan),
      ...(plan.money ? moneyLoadOptions(plan) : {}),
    },
    {
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      onSecond: (second) => hooks.progress?.(formatDemoProgress(state, second)),
    },
  )
  const [load, events] = await Promise.all([loadRun, chaos])
  const { check, drained, money } = await settlePhase(db, stack, plan, load, setCents, options, hooks)
  const samples = await sampler.stop(load.startedAtMs)
  const summary = summaryRow(strategy, plan, load, events, chaosStartedAtMs, check, drained)
  log(
    `${strategy}: ${plan.id} done: ${summary.requestsPerSecond} req/s, sold ${summary.sold}, oversold ${summary.oversold}, persisted ${summary.persisted} → ${summary.verdict}`,
  )
  const crowd =
    sale?.opensAtEpochMs === undefined ? undefined : crowdRun(plan, load, sale.opensAtEpochMs, sale.answer)
  if (crowd) log(`${strategy}: ${plan.id}:\n${formatCrowd(crowd.figures)}`)
  if (money) log(`${strategy}: ${plan.id}: ${formatMoneyLine(money)}`)
  return {
    ...(crowd ? { crowd } : {}),
    ...(money ? { money } : {}),
    id: plan.id,
    label: plan.label,
    stock: plan.stock,
    load: {
      series: load.series,
      startedAtMs: load.startedAtMs,
      durationMs: load.durationMs,
      latency: load.latency,
    },
    stockRemaining: samples.stock,
    queuePending: samples.pending,
    faults: events,
    chaosStartedAtMs,
    summary,
  }
}

async function runStrategy(
  strategy: DemoStrategy,
  options: ResolvedDemoOptions,
  hooks: DemoHooks,
): Promise<{ report: StrategyReport; sql: string }> {
  const log = hooks.log ?? (() => {})
  const sql = await openSqlTarget(options, strategy)
  log(
    `${strategy}: starting a 3+3 Redis Cluster, 5 lock nodes, ${options.instances} service processes, a worker`,
  )
  log(`${strategy}: SQL: ${sql.description}`)
  let stack: LocalStack | undefined
  const phases: PhaseReport[] = []
  let skipped: string | undefined
  const moneySkipped: { phase: string; reason: string }[] = []
  try {
    stack = await startStack({
      strategy,
      instances: options.instances,
      port: 0,
      ...(sql.url === undefined ? {} : { databaseUrl: sql.url }),
      env: { ...DEMO_ENV },
      echo: options.echo,
    })
    const db = connectDb(stack.databaseUrl, 2)
    try {
      for (const plan of selectPhases(phasePlans(options.profile), options.phases)) {
        if (hooks.signal?.aborted) break
        if (plan.money) {
          // Asked, not assumed: a strategy whose sales cannot be paid later says so in its 400.
          const { refused } = await putMoneySale(stack, plan)
          if (refused) {
            moneySkipped.push({ phase: plan.id, reason: refused })
            log(`${strategy}: ${plan.id} ${refused}`)
            continue
          }
        }
        if (plan.crowd && strategy === 'redlock') {
          // Both crowd phases or neither: the direct one alone compares with nothing.
          if (plan.crowd.mode === 'waiting-room') {
            skipped = await roomRefusal(stack, strategy, plan)
            log(`${strategy}: waiting-room comparison ${skipped}`)
          }
          continue
        }
        phases.push(await runPhase(strategy, plan, stack, db, options, hooks))
      }
    } finally {
      await db.end()
    }
  } finally {
    const stopping = Date.now()
    await stack?.stop()
    await sql.drop().catch(() => {})
    log(`${strategy}: stack stopped in ${((Date.now() - stopping) / 1000).toFixed(1)} s`)
  }
  return {
    report: {
      strategy,
      description: STRATEGY_DESCRIPTIONS[strategy],
      expectedCorrect: strategy !== 'naive',
      phases,
      ...comparisonOf(phases, skipped),
      ...(moneySkipped.length > 0 ? { moneySkipped } : {}),
    },
    sql: sql.description,
  }
}

function comparisonOf(
  phases: PhaseReport[],
  skipped: string | undefined,
): { roomComparison?: RoomComparison } {
  if (skipped !== undefined) return { roomComparison: { skipped } }
  const comparison = roomComparison(phases)
  return comparison ? { roomComparison: comparison } : {}
}

export async function runDemo(input: DemoOptions = {}, hooks: DemoHooks = {}): Promise<DemoResult> {
  const options = resolveDemoOptions(input)
  const strategies: StrategyReport[] = []
  const sqls = new Set<string>()
  const generatedAt = new Date().toISOString()
  for (const strategy of options.strategies) {
    if (hooks.signal?.aborted) break
    const { report, sql } = await runStrategy(strategy, options, hooks)
    strategies.push(report)
    sqls.add(sql.replace(/, fresh database .*/, ', a fresh database per strategy'))
  }
  const aborted = hooks.signal?.aborted === true
  const input_: ReportInput = {
    version: REPORT_INPUT_VERSION,
    title: 'Flash sale under load and chaos',
    generatedAt,
    meta: { ...runMeta(), profile: options.profile, SQL: [...sqls].join('; ') },
    verdict: demoVerdict(strategies, aborted),
    strategies,
  }
  const reportFile = writeReport(options.reportDir, input_)
  writeFileSync(join(options.reportDir, 'report.json'), `${JSON.stringify(input_)}\n`)
  return { input: input_, reportFile, ok: input_.verdict.ok, aborted }
}
