import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import { readServerStats, resetServerStats, type TopLevelCommandCounter } from './command-stats.js'
import type { LockDriver } from './driver.js'
import type { BenchSettings } from './settings.js'
import { type ContendedResult, runContended, runUncontended, type UncontendedResult } from './workloads.js'

export const PHASES = ['a-c1', 'a-c64', 'b-contended', 'b-isolated', 'c-single-c64'] as const
export type Phase = (typeof PHASES)[number]

export const PHASE_TITLES: Record<Phase, string> = {
  'a-c1': '(a) Redlock, 5 nodes, uncontended, concurrency 1',
  'a-c64': '(a) Redlock, 5 nodes, uncontended, concurrency 64',
  'b-contended': '(b) Redlock, 5 nodes, 32 workers on one key, ~1 ms hold',
  'b-isolated':
    "(b') as (b), but every worker has its own lock manager and connections, as 32 processes would",
  'c-single-c64': '(c) single node, uncontended, concurrency 64',
}

/** Redlock phases use the 5-node drivers; (c) uses the single-node ones. */
export function isSingleNode(phase: Phase): boolean {
  return phase === 'c-single-c64'
}

export function isContended(phase: Phase): boolean {
  return phase === 'b-contended' || phase === 'b-isolated'
}

export interface CommandCost {
  /** Server-side, all nodes, scripts' inner redis.call() included. */
  serverTotal: number
  /** EVAL/EVALSHA/FCALL calls, all nodes. */
  serverScripts: number
  /** Top-level commands the process wrote (client side). */
  topLevel: number
  byCommand: Record<string, number>
}

export type PhaseResult =
  | { kind: 'uncontended'; result: UncontendedResult; commands: CommandCost }
  | { kind: 'contended'; result: ContendedResult; commands: CommandCost }

export interface PhaseContext {
  settings: BenchSettings
  /** Admin connections to the nodes the driver talks to, used only outside the timed window. */
  admins: readonly Redis[]
  counter: TopLevelCommandCounter
}

function runWorkload(
  drivers: readonly LockDriver[],
  phase: Phase,
  durationMs: number,
  s: BenchSettings,
  tag: string,
) {
  const driver = drivers[0]!
  switch (phase) {
    case 'a-c1':
    case 'a-c64':
      return runUncontended(driver, {
        concurrency: phase === 'a-c1' ? s.uncontendedConcurrency[0]! : s.uncontendedConcurrency[1]!,
        durationMs,
        tag,
      })
    case 'c-single-c64':
      return runUncontended(driver, { concurrency: s.singleNodeConcurrency, durationMs, tag })
    case 'b-contended':
    case 'b-isolated':
      return runContended(drivers, { workers: s.contendedWorkers, holdMs: s.holdMs, durationMs, tag })
  }
}

function phaseDuration(phase: Phase, s: BenchSettings): number {
  if (isContended(phase)) return s.contendedMs
  if (phase === 'c-single-c64') return s.singleNodeMs
  return s.uncontendedMs
}

/**
 * Warm-up, then one timed run inside a command-count window. The settle pause before reading
 * the counters lets replies from non-quorum nodes (libraries that resolve at quorum) land.
 * `drivers` holds one driver, or one per worker for (b').
 */
export async function runPhase(
  drivers: readonly LockDriver[],
  phase: Phase,
  ctx: PhaseContext,
): Promise<PhaseResult> {
  const s = ctx.settings
  const tag = `${phase}:${drivers[0]!.library}`
  await runWorkload(drivers, phase, s.warmupMs, s, `${tag}:warmup`)
  await sleep(s.settleMs)
  await resetServerStats(ctx.admins)
  ctx.counter.open()
  const outcome = await runWorkload(drivers, phase, phaseDuration(phase, s), s, tag)
  await sleep(s.settleMs)
  const topLevel = ctx.counter.close()
  const server = await readServerStats(ctx.admins)
  const commands: CommandCost = {
    serverTotal: server.total,
    serverScripts: server.scripts,
    topLevel,
    byCommand: server.byCommand,
  }
  return 'acquisitionsPerSec' in outcome
    ? { kind: 'contended', result: outcome, commands }
    : { kind: 'uncontended', result: outcome, commands }
}
