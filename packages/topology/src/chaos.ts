// Chaos as data: a fault schedule is a plain array (`[{ at: '20s', fault: 'kill-master' }]`) so
// tests, the flash-sale demo and the benchmarks share one scenario and one runner, and reports
// can mark the recorded fault moments on their time axes.
//
// Decisions the issue leaves open:
// - Steps start at their `at` whatever the others do: handlers run concurrently, so a slow
//   failover does not shift the faults scheduled after it.
// - A handler may return an undo; it runs `durationMs` after the fault is in effect (the handler
//   resolved), right away when durationMs is absent. `endedMs` is when the undo finished (or the
//   handler, without undo): the window a report shades.
// - A failing handler or undo does not stop the run: its message lands in the event's `error`.
// - On abort no new step starts, pending undos run at once (a paused node is never left
//   SIGSTOPped) and runChaos resolves with the events so far.
// - Event times are ms since the run's origin (`startedAt`, Date.now() epoch ms, default: the
//   call), so a caller that starts a load run at the same moment can pass the same origin.
import type { ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import type { RedisCluster } from './cluster.js'
import { InvalidOptionError, TopologyTimeoutError } from './errors.js'
import type { NetworkFaults } from './network.js'
import type { RedisNode } from './node.js'

/** One fault at one moment. `at` is a duration string ('500ms', '20s', '1m', '1m30s') or ms. */
export interface ChaosStep {
  at: string | number
  /** Key into the `faults` handler table. */
  fault: string
  /** How long the fault lasts before its undo runs (pause → resume, kill → restart). @defaultValue 0 */
  durationMs?: number
  /** Which node/process the handler acts on (a node name like 'node-2' or an index). */
  target?: string
  /** Shown in reports instead of `fault`. */
  label?: string
}

export type ChaosSchedule = readonly ChaosStep[]

export interface ChaosContext {
  /** Aborted when the run is aborted: long handlers (failover waits) should pass it on. */
  readonly signal: AbortSignal
  /** ms since the run's origin. */
  elapsedMs(): number
}

export type ChaosUndo = () => Promise<void>
export type FaultHandler = (step: ResolvedChaosStep, ctx: ChaosContext) => Promise<ChaosUndo | undefined>

export interface ResolvedChaosStep extends ChaosStep {
  atMs: number
  durationMs: number
  /** Position in the schedule. */
  index: number
}

/** What happened to one step; JSON-serialisable. Times are ms since the run's origin. */
export interface ChaosEvent {
  fault: string
  label: string
  target?: string
  /** Scheduled time. */
  at: number
  /** When the handler was called. */
  startedMs: number
  /** When the fault was in effect (handler resolved). */
  appliedMs?: number
  /** When the undo (or, without undo, the handler) finished; absent while still running. */
  endedMs?: number
  error?: string
  errorCode?: string
}

export interface ChaosUpdate {
  type: 'start' | 'applied' | 'end'
  event: Readonly<ChaosEvent>
}

export interface RunChaosOptions {
  schedule: ChaosSchedule
  faults: Readonly<Record<string, FaultHandler>>
  signal?: AbortSignal
  onEvent?: (update: ChaosUpdate) => void
  /** Origin of the run's clock, Date.now() epoch ms. @defaultValue Date.now() at the call */
  startedAt?: number
}

const DURATION_PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/g
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }

/**
 * '500ms' → 500, '20s' → 20000, '1m30s' → 90000, '0' → 0; a finite number >= 0 is taken as ms.
 * Throws InvalidOptionError (code E_INVALID_OPTION) naming `option` for anything else.
 */
export function parseDuration(value: string | number, option = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value
    throw new InvalidOptionError(option, `expected a duration >= 0 in ms, got ${value}`)
  }
  const text = String(value).trim()
  if (text === '0') return 0 // the one duration that needs no unit
  let total = 0
  let consumed = ''
  for (const m of text.matchAll(DURATION_PART)) {
    total += Number(m[1]) * UNIT_MS[m[2]!]!
    consumed += m[0]
  }
  if (text === '' || consumed !== text) {
    throw new InvalidOptionError(
      option,
      `expected a duration like '500ms', '20s', '1m' or '1m30s', got '${text}'`,
    )
  }
  return total
}

/** Checks every step up front, so a typo fails before any fault is injected. */
export function resolveSchedule(
  schedule: ChaosSchedule,
  faults?: Readonly<Record<string, FaultHandler>>,
): ResolvedChaosStep[] {
  if (!Array.isArray(schedule)) throw new InvalidOptionError('schedule', 'expected an array of steps')
  return schedule.map((step, index) => {
    const where = `schedule[${index}]`
    if (typeof step !== 'object' || step === null) throw new InvalidOptionError(where, 'expected an object')
    if (typeof step.fault !== 'string' || step.fault === '') {
      throw new InvalidOptionError(`${where}.fault`, 'expected a non-empty fault name')
    }
    if (faults && !Object.hasOwn(faults, step.fault)) {
      const known = Object.keys(faults).join(', ') || '(none)'
      throw new InvalidOptionError(`${where}.fault`, `no handler for '${step.fault}'; known: ${known}`)
    }
    const atMs = parseDuration(step.at, `${where}.at`)
    const durationMs = step.durationMs ?? 0
    if (!Number.isFinite(durationMs) || durationMs < 0) {
      throw new InvalidOptionError(`${where}.durationMs`, `expected a number of ms >= 0, got ${durationMs}`)
    }
    return { ...step, atMs, durationMs, index }
  })
}

function describeError(err: unknown): { error: string; errorCode?: string } {
  const message = err instanceof Error ? err.message : String(err)
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' ? { error: message, errorCode: code } : { error: message }
}

/**
 * Sleeps until `ms` on the run's clock; false when aborted first. Loops: Node's timers run on a
 * monotonic clock and round, so a timer can fire a millisecond before Date.now() reaches the mark
 * (seen in CI: a step scheduled at 200 ms started at 199), and a step must never start early.
 */
async function sleepUntil(ms: number, now: () => number, signal: AbortSignal): Promise<boolean> {
  for (;;) {
    if (signal.aborted) return false
    const wait = ms - now()
    if (wait <= 0) return true
    try {
      await sleep(wait, undefined, { signal })
    } catch {
      return false
    }
  }
}

/** Runs the schedule; resolves with one event per step that started, in schedule order. */
export async function runChaos(options: RunChaosOptions): Promise<ChaosEvent[]> {
  const steps = resolveSchedule(options.schedule, options.faults)
  const origin = options.startedAt ?? Date.now()
  const now = () => Date.now() - origin
  // Our own controller: the caller's abort reaches handlers, and we can wake pending undos.
  const controller = new AbortController()
  const onAbort = () => controller.abort(options.signal?.reason)
  options.signal?.addEventListener('abort', onAbort, { once: true })
  if (options.signal?.aborted) onAbort()
  const ctx: ChaosContext = { signal: controller.signal, elapsedMs: now }
  const events: (ChaosEvent | undefined)[] = steps.map(() => undefined)
  const emit = (type: ChaosUpdate['type'], event: ChaosEvent) =>
    options.onEvent?.({ type, event: { ...event } })

  const runStep = async (step: ResolvedChaosStep): Promise<void> => {
    if (!(await sleepUntil(step.atMs, now, controller.signal))) return
    const event: ChaosEvent = {
      fault: step.fault,
      label: step.label ?? step.fault,
      ...(step.target === undefined ? {} : { target: step.target }),
      at: step.atMs,
      startedMs: now(),
    }
    events[step.index] = event
    emit('start', event)
    let undo: ChaosUndo | undefined
    try {
      undo = await options.faults[step.fault]!(step, ctx)
      event.appliedMs = now()
      emit('applied', event)
    } catch (err) {
      Object.assign(event, describeError(err))
    }
    if (typeof undo === 'function') {
      // Aborted: undo at once rather than leave a node down or stopped.
      await sleepUntil((event.appliedMs ?? now()) + step.durationMs, now, controller.signal)
      try {
        await undo()
      } catch (err) {
        if (event.error === undefined) Object.assign(event, describeError(err))
      }
    }
    event.endedMs = now()
    emit('end', event)
  }

  try {
    await Promise.all(steps.map(runStep))
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
  }
  return events.filter((e) => e !== undefined)
}

// ---------------------------------------------------------------------------------------------
// Ready-made handlers for the faults the flash-sale demo injects.

/** `target` as a node name ('node-2') or index ('2'); `fallback` index when absent. */
export function pickNode(nodes: readonly RedisNode[], target: string | undefined, fallback = 0): RedisNode {
  const node =
    target === undefined
      ? nodes[fallback]
      : (nodes.find((n) => n.name === target) ?? (/^\d+$/.test(target) ? nodes[Number(target)] : undefined))
  if (!node) {
    const names = nodes.map((n) => n.name).join(', ')
    throw new InvalidOptionError('target', `no node '${target ?? fallback}' among ${names}`)
  }
  return node
}

export interface KillMasterOptions {
  /** Restart the killed master (it rejoins as a replica) in the undo. @defaultValue true */
  rejoin?: boolean
  /** Which master to kill when the step has no `target`: index into cluster.masters(). @defaultValue 0 */
  masterIndex?: number
}

/**
 * kill -9 a cluster master and wait for its replica's promotion (RedisCluster.failover); the undo
 * restarts the old master with its data so that a later kill-master still has a replica to promote.
 * `target` is a node name; without it, masters()[masterIndex] is killed.
 */
export function killClusterMaster(cluster: RedisCluster, opts: KillMasterOptions = {}): FaultHandler {
  const { rejoin = true, masterIndex = 0 } = opts
  return async (step) => {
    const masters = await cluster.masters()
    const master = step.target === undefined ? masters[masterIndex] : pickNode(masters, step.target)
    if (!master) throw new InvalidOptionError('target', `the cluster has no master #${masterIndex}`)
    await cluster.failover(master)
    return rejoin ? () => cluster.rejoin(master) : undefined
  }
}

export interface PartitionMasterOptions {
  /** Which master when the step has no `target`: index into cluster.masters(). @defaultValue 0 */
  masterIndex?: number
  /**
   * After the heal, wait until every node says cluster_state:ok again (the old master, if its
   * replica was promoted meanwhile, has rejoined as a replica), so the event's end marks recovery.
   * @defaultValue true
   */
  waitForOk?: boolean
}

/**
 * Cuts a cluster master off from every other node of the cluster (iptables, nodes started with
 * `distinctHosts`) for the step's durationMs; clients still reach it. The cluster decides what
 * happens (after cluster-node-timeout its replica is promoted); the undo heals this cut only.
 * `target` is a node name; without it, masters()[masterIndex].
 */
export function partitionMaster(
  cluster: RedisCluster,
  faults: NetworkFaults,
  opts: PartitionMasterOptions = {},
): FaultHandler {
  const { masterIndex = 0, waitForOk = true } = opts
  return async (step) => {
    const masters = await cluster.masters()
    const master = step.target === undefined ? masters[masterIndex] : pickNode(masters, step.target)
    if (!master) throw new InvalidOptionError('target', `the cluster has no master #${masterIndex}`)
    const cut = await faults.isolate(master, cluster.nodes)
    return async () => {
      await cut.heal()
      if (waitForOk) await cluster.waitForOk()
    }
  }
}

/** Cuts one node (by `target`) off from all the others for the step's durationMs; the undo heals. */
export function isolateNode(nodes: readonly RedisNode[], faults: NetworkFaults): FaultHandler {
  return async (step) => {
    const cut = await faults.isolate(pickNode(nodes, step.target), nodes)
    return () => cut.heal()
  }
}

/**
 * kill -9 one of N independent lock nodes (the articles' `kubectl delete pod redis-redlock-0`);
 * the undo restarts it on the same port with its data (AOF, if the nodes were started with it).
 */
export function killNode(nodes: readonly RedisNode[], opts: { empty?: boolean } = {}): FaultHandler {
  return async (step) => {
    const node = pickNode(nodes, step.target)
    await node.kill()
    return () => node.restart({ empty: opts.empty ?? false })
  }
}

/** SIGSTOP a node for the step's durationMs (it accepts connections but answers nothing), then SIGCONT. */
export function pauseNode(nodes: readonly RedisNode[]): FaultHandler {
  return async (step) => {
    const node = pickNode(nodes, step.target)
    node.pause()
    return async () => node.resume()
  }
}

/** A child process the caller owns, by name: how to reach it now and how to start it again. */
export interface KillableProcess {
  /** The current child, undefined while it is down. */
  current(): ChildProcess | undefined
  /** Starts a new child (and waits until it is ready); omitted: the process stays dead. */
  restart?(): Promise<void>
}

const EXIT_TIMEOUT_MS = 10_000

async function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit').then(() => true)
  const timedOut = sleep(EXIT_TIMEOUT_MS).then(() => false)
  if (!(await Promise.race([exited, timedOut]))) {
    throw new TopologyTimeoutError(`pid ${child.pid} to exit after SIGKILL`, EXIT_TIMEOUT_MS)
  }
}

/**
 * kill -9 a child process the caller names in `target` (e.g. the demo's order worker) and wait
 * until it has exited; the undo calls its restart(). With one process, `target` may be omitted.
 */
export function killProcess(processes: Readonly<Record<string, KillableProcess>>): FaultHandler {
  return async (step) => {
    const names = Object.keys(processes)
    const name = step.target ?? (names.length === 1 ? names[0] : undefined)
    const proc = name === undefined ? undefined : processes[name]
    if (!proc)
      throw new InvalidOptionError('target', `no process '${step.target}'; known: ${names.join(', ')}`)
    const child = proc.current()
    if (child?.pid === undefined) throw new InvalidOptionError('target', `process '${name}' is not running`)
    child.kill('SIGKILL')
    await waitForExit(child)
    return proc.restart ? () => proc.restart!() : undefined
  }
}
