/**
 * npm run demo: Redlock with fencing tokens on 5 local redis-server nodes, while nodes are
 * killed, restarted with and without their data, paused and slowed down. Exits 1 if an
 * invariant fails. See README.md and docs/locks.md.
 */
import { setMaxListeners } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { FAULT_PLAN, FAULT_RUN_MS, type NodeState, runFaults } from './faults.js'
import { History } from './history.js'
import { LockEvents } from './observe.js'
import { createPod, LOCK_SETTINGS, type Pod } from './pods.js'
import { quarantineScenario } from './quarantine-scenario.js'
import { printReport, type RunResults } from './report.js'
import { staleHolder } from './stale-holder.js'
import { AccountStore } from './store.js'
import { lockedWorker, newStats, unlockedWorker } from './workers.js'

const PODS = 4
const WORKERS_PER_POD = 5
const UNLOCKED_RUN_MS = 2_500
const STALE_HOLDER_AT_MS = 6_500

const t0 = performance.now()
const stamp = () => `[${((performance.now() - t0) / 1000).toFixed(1).padStart(5)}s]`
const log = (line: string) => console.log(`${stamp()} ${line}`)

/**
 * A signal that aborts after `ms` or with `parent`. Not AbortSignal.any + AbortSignal.timeout:
 * on Node 20 the combined signal can be garbage-collected before the timeout fires.
 */
function phaseSignal(parent: AbortSignal, ms: number): { signal: AbortSignal; clear(): void } {
  const controller = new AbortController()
  // Every waiting acquire listens on it: 20 workers exceed Node's default warning limit of 10.
  setMaxListeners(PODS * WORKERS_PER_POD * 4, controller.signal)
  const end = () => controller.abort()
  const timer = setTimeout(end, ms)
  parent.addEventListener('abort', end, { once: true })
  return {
    signal: controller.signal,
    clear() {
      clearTimeout(timer)
      parent.removeEventListener('abort', end)
    },
  }
}

/** Prints `line()` once a second until stopped. */
function ticker(line: () => string): { stop(): void } {
  const timer = setInterval(() => log(line()), 1_000)
  return { stop: () => clearInterval(timer) }
}

async function waitForQuarantines(events: LockEvents, pods: readonly Pod[], stop: AbortSignal) {
  log(`waiting for restart quarantine… (fresh nodes sit out maxTtlMs = ${LOCK_SETTINGS.maxTtlMs} ms)`)
  // A probe per pod returns once that pod has a voting majority again.
  await Promise.all(
    pods.map(async (p) => {
      const lock = await p.redlock.acquire('demo:probe', {
        retryCount: 100,
        retryDelayMs: 100,
        acquireTimeoutMs: 10_000,
        signal: stop,
      })
      await lock.release()
    }),
  )
  const left = Math.max(0, ...[...events.quarantinedUntil.values()].map((u) => u - performance.now()))
  if (left > 0) await sleep(left, undefined, { signal: stop })
}

async function main(stop: AbortSignal): Promise<number> {
  console.log('kunci lock demo: 5 independent Redis nodes, fencing tokens, faults injected mid-run\n')
  const events = new LockEvents()
  log('starting 5 lock nodes (AOF appendfsync everysec, each behind a fault proxy) and 1 store node…')
  const lockNodes = await startNodes({ count: 5, aof: 'everysec', proxy: true })
  const storeNodes = await startNodes({ count: 1, aof: false, proxy: false })
  const nodes = lockNodes.nodes
  const storeNode = storeNodes.nodes[0]!
  const storeClient = new Redis({ host: storeNode.host, port: storeNode.port })
  const pods: Pod[] = []
  try {
    log(`lock nodes on ports ${nodes.map((n) => n.port).join(', ')}; store on ${storeNode.port}`)
    for (let p = 0; p < PODS; p++) pods.push(createPod(`pod-${p}`, nodes))
    log(
      `${PODS} pods (one Redlock and 5 connections each) × ${WORKERS_PER_POD} workers; ` +
        `ttlMs ${LOCK_SETTINGS.ttlMs}, maxTtlMs ${LOCK_SETTINGS.maxTtlMs}`,
    )

    // Phase 1: the same read-modify-write with no lock at all, while the fresh nodes sit out
    // their start-up quarantine.
    console.log('\n── phase 1: no lock ──')
    const unlockedStore = new AccountStore(storeClient, 'unlocked')
    await unlockedStore.reset(0)
    const unlockedStats = newStats()
    const phase1 = phaseSignal(stop, UNLOCKED_RUN_MS)
    const tick1 = ticker(() => `no lock: ${unlockedStats.writes} writes`)
    await Promise.all(
      Array.from({ length: PODS * WORKERS_PER_POD }, () =>
        unlockedWorker(unlockedStore, unlockedStats, phase1.signal),
      ),
    )
    tick1.stop()
    phase1.clear()
    const unlocked = await unlockedStore.snapshot()
    log(
      `no lock: ${unlocked.writes} writes, balance ${unlocked.balance} → ${unlocked.writes - unlocked.balance} updates lost`,
    )
    if (stop.aborted) return 130

    // Phase 2: under the lock, while the fault plan runs.
    console.log('\n── phase 2: with the lock, under faults ──')
    await waitForQuarantines(events, pods, stop)
    const store = new AccountStore(storeClient, 'locked')
    await store.reset(0)
    const history = new History()
    const stats = newStats()
    const state: NodeState[] = nodes.map(() => 'up')
    const phase2 = phaseSignal(stop, FAULT_RUN_MS)
    const startedAt = performance.now()
    const contentionBefore = events.contention
    const nodeErrorsBefore = events.nodeErrors
    const quarantinesBefore = events.quarantines
    let lastHolds = 0
    const tick2 = ticker(() => {
      const holds = history.holds.length
      const nodeList = state
        .map((s, i) => `${i}:${s}${s === 'up' && events.isQuarantined(i) ? '(quarantined)' : ''}`)
        .join(' ')
      const line =
        `holds ${holds} (+${holds - lastHolds}/s)  contention ${events.contention - contentionBefore}  ` +
        `outages ${stats.failures.get('E_LOCK_UNAVAILABLE') ?? 0}  nodes ${nodeList}`
      lastHolds = holds
      return line
    })
    const workers = pods.flatMap((pod) =>
      Array.from({ length: WORKERS_PER_POD }, (_, w) =>
        lockedWorker({ name: `${pod.name}/w${w}`, pod, store, history, stats, stop: phase2.signal }),
      ),
    )
    const gcPod = createPod('pod-gc', nodes)
    pods.push(gcPod)
    const stale = sleep(STALE_HOLDER_AT_MS, undefined, { signal: phase2.signal }).then(
      () => staleHolder({ pod: gcPod, store, history, pauseMs: 700, log }),
      () => undefined,
    )
    const faults = await runFaults({ plan: FAULT_PLAN, nodes, state, startedAt, stop, log })
    const staleOutcome = await stale
    await Promise.all(workers)
    tick2.stop()
    phase2.clear()
    const locked = await store.snapshot()
    const verdict = history.check()
    const lockedContention = events.contention - contentionBefore
    const quarantines = events.quarantines - quarantinesBefore
    log(`with the lock: ${history.holds.length} holds, ${locked.writes} writes, balance ${locked.balance}`)
    if (stop.aborted) return 130

    // Phase 3: why restarted-empty nodes are quarantined.
    console.log('\n── phase 3: a node restarted empty, with and without quarantine ──')
    for (const n of nodes) if (!n.running) await n.restart()
    for (const n of nodes) n.proxy?.reset()
    await waitForQuarantines(events, pods, stop)
    const scenario = await quarantineScenario({
      nodes,
      safePod: pods[0]!,
      store: new AccountStore(storeClient, 'quarantine'),
      log,
    })

    const results: RunResults = {
      unlocked,
      locked,
      holds: history.holds.length,
      verdict,
      stats,
      contention: lockedContention,
      nodeErrors: events.nodeErrors - nodeErrorsBefore,
      quarantines,
      faults,
      stale: staleOutcome,
      scenario,
      elapsedMs: performance.now() - t0,
    }
    return printReport(results)
  } finally {
    await Promise.all(pods.map((p) => p.close()))
    storeClient.disconnect()
    events.close()
    await lockNodes.stop()
    await storeNodes.stop()
  }
}

const interrupt = new AbortController()
setMaxListeners(PODS * WORKERS_PER_POD * 4, interrupt.signal)
process.on('SIGINT', () => {
  if (interrupt.signal.aborted) process.exit(130) // second Ctrl-C: the exit handler still kills the nodes
  console.log('\nSIGINT: stopping workers and nodes… (Ctrl-C again to force)')
  interrupt.abort()
})

main(interrupt.signal).then(
  (code) => {
    process.exitCode = interrupt.signal.aborted ? 130 : code
    // Everything is closed, so the process should end on its own; if a handle leaked, say so.
    setTimeout(() => {
      console.error('lock demo: something is still open after the run; exiting anyway')
      process.exit(process.exitCode)
    }, 5_000).unref()
  },
  (err: unknown) => {
    console.error(interrupt.signal.aborted ? 'lock demo interrupted' : err)
    process.exit(interrupt.signal.aborted ? 130 : 1)
  },
)
