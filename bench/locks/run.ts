/**
 * Lock benchmark: kunci against node-redlock, @sesamecare-oss/redlock, redlock-universal and
 * redis-semaphore on 5 local redis-server nodes, interleaved rounds, medians with min–max.
 *
 *   npm run bench:locks [-- <flags as below>]   (ensure-redis, build, then this script)
 *   npx tsx bench/locks/run.ts [--quick] [--rounds N] [--libs a,b,...]   (after npm run build)
 *     [--phases a-c1,a-c64,b-contended,b-isolated,c-single-c64] [--retry-delay MS] [--retry-jitter MS]
 *     [--c1-interleaved S]  instead of the phases (unless --phases is given too): C=1 for S seconds
 *                    with the libraries taking turns in bursts of 20 operations (interleaved.ts), the
 *                    measure to compare libraries within 1–2 % on a shared machine
 *     [--link-ms X | A-B]  each node behind a delay link (topology's startDelayLinks, a forwarder in
 *                    C that keeps time to the microsecond) adding X ms to every round trip, or with
 *                    A-B delays spread evenly from A to B over the nodes (0.5-1: 0.5, 0.625, … 1);
 *                    prints each link's measured round trip and each round's C=1 ratio to the best
 *                    peer
 *
 * See bench/RESULTS.md for what each phase measures and how to read the numbers.
 */
import { parseArgs } from 'node:util'
import { type DelayLinks, type NodeSet, startDelayLinks, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { TopLevelCommandCounter } from './command-stats.js'
import { type DriverConfig, type DriverFactory, LIBRARIES, type Library, type LockDriver } from './driver.js'
import { describeEnvironment, writeResults } from './environment.js'
import { interleavedTable, runInterleaved } from './interleaved.js'
import { type PhaseSummary, summarize } from './metrics.js'
import {
  nodeRedlockDriver,
  redisSemaphoreDriver,
  redlockUniversalDriver,
  sesamecareDriver,
} from './peer-drivers.js'
import { isSingleNode, PHASES, type Phase, type PhaseResult, runPhase } from './phases.js'
import { evaluateTargets, phaseTable, targetTable } from './report.js'
import { type BenchSettings, FULL_SETTINGS, QUICK_PHASES, QUICK_SETTINGS } from './settings.js'
import { type Spread, spread } from './stats.js'

const PEER_FACTORIES: Record<Exclude<Library, 'kunci'>, DriverFactory> = {
  'node-redlock': nodeRedlockDriver,
  'sesamecare-redlock': sesamecareDriver,
  'redlock-universal': redlockUniversalDriver,
  'redis-semaphore': redisSemaphoreDriver,
}

/** kunci is loaded from its built package; without a build the peers still run. */
async function factoryFor(library: Library): Promise<DriverFactory> {
  if (library !== 'kunci') return PEER_FACTORIES[library]
  const { kunciDriver } = await import('./kunci-drivers.js')
  return kunciDriver
}

interface Cli {
  settings: BenchSettings
  quick: boolean
  libraries: Library[]
  phases: Phase[]
  /** --link-ms: what each node's link adds to a round trip (ms), undefined for plain loopback. */
  linkMs: LinkSpec | undefined
  /** --c1-interleaved: seconds of interleaved C=1 (interleaved.ts), undefined for none. */
  interleavedSec: number | undefined
}

function list<T extends string>(
  flag: string,
  value: string | undefined,
  all: readonly T[],
  defaults: readonly T[] = all,
): T[] {
  if (value === undefined) return [...defaults]
  const picked = value.split(',') as T[]
  const unknown = picked.filter((v) => !all.includes(v))
  if (unknown.length > 0)
    throw new Error(`unknown ${flag} ${unknown.join(',')}; choose from ${all.join(',')}`)
  return picked
}

/** A delay for every link, or a range spread evenly over the nodes. */
type LinkSpec = { from: number; to: number }

function positive(flag: string, value: string): number {
  const n = Number(value)
  if (!(n > 0 && n <= 1_000)) throw new Error(`${flag} must be a number of ms in (0, 1000], got ${value}`)
  return n
}

function linkSpec(value: string): LinkSpec {
  const [a, b, ...rest] = value.split('-')
  if (rest.length > 0 || a === undefined) throw new Error(`--link-ms takes X or A-B (ms), got ${value}`)
  const from = positive('--link-ms', a)
  const to = b === undefined ? from : positive('--link-ms', b)
  if (to < from) throw new Error(`--link-ms A-B needs A ≤ B, got ${value}`)
  return { from, to }
}

/** Node i of n gets from + (to − from) × i / (n − 1): 0.5-1 over 5 nodes is 0.5, 0.625, … 1. */
function linkDelays(spec: LinkSpec, n: number): number[] {
  return Array.from({ length: n }, (_, i) =>
    n === 1 ? spec.from : spec.from + ((spec.to - spec.from) * i) / (n - 1),
  )
}

function integer(flag: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be an integer ≥ ${min}, got ${value}`)
  return n
}

function parseCli(): Cli {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      libs: { type: 'string' },
      phases: { type: 'string' },
      'retry-delay': { type: 'string' },
      'retry-jitter': { type: 'string' },
      'link-ms': { type: 'string' },
      'c1-interleaved': { type: 'string' },
    },
  })
  const interleavedSec =
    values['c1-interleaved'] === undefined
      ? undefined
      : integer('--c1-interleaved', values['c1-interleaved'], 0, 10)
  const base = values.quick ? QUICK_SETTINGS : FULL_SETTINGS
  const retry = {
    ...base.retry,
    delayMs: integer('--retry-delay', values['retry-delay'], base.retry.delayMs, 1),
    jitterMs: integer('--retry-jitter', values['retry-jitter'], base.retry.jitterMs, 0),
  }
  return {
    settings: { ...base, rounds: integer('--rounds', values.rounds, base.rounds, 1), retry },
    quick: values.quick === true,
    libraries: list('--libs', values.libs, LIBRARIES),
    // With --c1-interleaved alone, no phases.
    phases:
      interleavedSec !== undefined && values.phases === undefined
        ? []
        : list('--phases', values.phases, PHASES, values.quick ? QUICK_PHASES : PHASES),
    interleavedSec,
    linkMs: values['link-ms'] === undefined ? undefined : linkSpec(values['link-ms']),
  }
}

const log = (line: string) => process.stderr.write(`${line}\n`)

interface Drivers {
  factory: DriverFactory
  redlock: LockDriver
  single: LockDriver
}

/** (b'): one driver per worker, connected before and closed after the phase, outside the timing. */
async function withWorkerDrivers<T>(
  d: Drivers,
  config: DriverConfig,
  workers: number,
  fn: (drivers: LockDriver[]) => Promise<T>,
): Promise<T> {
  const pool: LockDriver[] = []
  try {
    for (let i = 0; i < workers; i++) pool.push(await d.factory(config))
    return await fn(pool)
  } finally {
    await Promise.allSettled(pool.map((p) => p.close()))
  }
}

async function main(): Promise<void> {
  const { settings, quick, libraries, phases, linkMs, interleavedSec } = parseCli()
  const counter = new TopLevelCommandCounter()
  const started = Date.now()
  let nodeSet: NodeSet | undefined
  const admins: Redis[] = []
  const drivers = new Map<Library, Drivers>()
  let links: DelayLinks | undefined
  const stop = async () => {
    await Promise.allSettled([...drivers.values()].flatMap((d) => [d.redlock.close(), d.single.close()]))
    for (const a of admins) a.disconnect()
    await links?.stop()
    await nodeSet?.stop()
  }
  process.once('SIGINT', () => void stop().finally(() => process.exit(130)))
  try {
    // No topology proxies in-process: they would add a hop of latency that is not part of any
    // library (--link-ms adds one on purpose, in a process of its own).
    nodeSet = await startNodes({ count: settings.nodeCount, proxy: false })
    // The libraries dial the nodes, or with --link-ms the delay links in front of them.
    let nodes = nodeSet.nodes.map((n) => ({ host: n.host, port: n.port }))
    let link: { addedMs: number[]; rttMs: Spread[] } | undefined
    if (linkMs !== undefined) {
      const delays = linkDelays(linkMs, nodes.length)
      links = await startDelayLinks(nodes.map((n, i) => ({ ...n, delayMs: delays[i]! })))
      nodes = links.ports.map((port) => ({ host: '127.0.0.1', port }))
      const rttMs: Spread[] = []
      for (const n of nodes) rttMs.push(await roundTrip(n))
      link = { addedMs: delays, rttMs }
      log(
        `links: ${delays
          .map((d, i) => {
            const r = rttMs[i]!
            return `+${d.toFixed(3)} ms → PING round trip median ${r.median.toFixed(3)} ms (${r.min.toFixed(3)}–${r.max.toFixed(3)})`
          })
          .join('; ')}`,
      )
    }
    // The admin connections (INFO, command counts) go to the nodes themselves.
    for (const n of nodeSet.nodes) admins.push(new Redis({ host: n.host, port: n.port }))
    const env = await describeEnvironment(admins[0]!)
    log(`nodes: ${nodes.map((n) => n.port).join(', ')}; redis ${env.redis}, node ${env.node}, ${env.cpu}`)

    const redlockConfig: DriverConfig = { ttlMs: settings.ttlMs, retry: settings.retry, nodes }
    const skipped: Record<string, string> = {}
    for (const library of libraries) {
      try {
        const factory = await factoryFor(library)
        drivers.set(library, {
          factory,
          redlock: await factory(redlockConfig),
          single: await factory({ ...redlockConfig, nodes: nodes.slice(0, 1) }),
        })
      } catch (err) {
        skipped[library] = err instanceof Error ? `${err.name}: ${err.message}` : String(err)
        log(`skipping ${library}: ${skipped[library]}`)
      }
    }
    const active = libraries.filter((l) => drivers.has(l))

    const raw = Object.fromEntries(phases.map((p) => [p, {}])) as Record<
      Phase,
      Partial<Record<Library, PhaseResult[]>>
    >
    for (let round = 0; round < settings.rounds; round++) {
      // Rotate the order every round so no library always runs first (cold) or last.
      const order = active.map((_, i) => active[(i + round) % active.length]!)
      for (const phase of phases) {
        for (const library of order) {
          const d = drivers.get(library)!
          const single = isSingleNode(phase)
          const ctx = { settings, admins: single ? admins.slice(0, 1) : admins, counter }
          const result =
            phase === 'b-isolated'
              ? await withWorkerDrivers(d, redlockConfig, settings.contendedWorkers, (pool) =>
                  runPhase(pool, phase, ctx),
                )
              : await runPhase([single ? d.single : d.redlock], phase, ctx)
          ;(raw[phase][library] ??= []).push(result)
          const headline =
            result.kind === 'contended'
              ? `${result.result.acquisitionsPerSec.toFixed(0)} acq/s, p99 wait ${result.result.waitP99Ms.toFixed(1)} ms`
              : `${result.result.opsPerSec.toFixed(0)} ops/s`
          const failures = result.result.failures > 0 ? `, ${result.result.failures} failures` : ''
          log(`round ${round + 1}/${settings.rounds} ${phase} ${library}: ${headline}${failures}`)
        }
      }
    }

    const interleaved =
      interleavedSec === undefined
        ? undefined
        : await runInterleaved(new Map(active.map((l) => [l, drivers.get(l)!.redlock])), interleavedSec)

    const summaries = Object.fromEntries(PHASES.map((p) => [p, summarize(p, raw[p] ?? {})])) as Record<
      Phase,
      PhaseSummary
    >
    const targets = evaluateTargets(summaries)
    const tables = phases.map((p) => phaseTable(p, summaries[p], active))
    if (phases.length > 0) tables.push(targetTable(targets))
    const c1 = c1Ratios(raw['a-c1'] ?? {})
    const linkRtt = link && `links of ${link.rttMs.map((r) => r.median.toFixed(2)).join(', ')} ms round trip`
    if (c1.length > 0)
      tables.push(
        `C=1, kunci ÷ the best peer of the same round${linkRtt ? ` (${linkRtt})` : ''}: ` +
          `${c1.map((r) => `${r.ratio.toFixed(3)} (${r.best})`).join(', ')}; median ${spread(c1.map((r) => r.ratio)).median.toFixed(3)}`,
      )
    if (interleaved) tables.push(interleavedTable(interleaved, linkRtt ? `, ${linkRtt}` : ''))
    process.stdout.write(`\n${tables.join('\n\n')}\n\n`)
    const path = writeResults(env, quick, {
      environment: env,
      settings,
      quick,
      phases,
      link: link ?? null,
      c1Ratios: c1,
      c1Interleaved: interleaved ?? null,
      libraries: active,
      skipped,
      durationSec: Math.round((Date.now() - started) / 1000),
      targets,
      summaries,
      raw,
    })
    log(`raw results: ${path} (${Math.round((Date.now() - started) / 1000)} s)`)
  } finally {
    await stop()
  }
}

/** 200 PINGs one after another through `node`: the round trip a library sees, in ms. */
async function roundTrip(node: { host: string; port: number }): Promise<Spread> {
  const c = new Redis(node)
  try {
    await c.ping()
    const samples: number[] = []
    for (let i = 0; i < 200; i++) {
      const t = performance.now()
      await c.ping()
      samples.push(performance.now() - t)
    }
    return spread(samples)
  } finally {
    c.disconnect()
  }
}

/** Per round: kunci's C=1 ops/s over the best peer's in that round (the rounds rotate the order). */
function c1Ratios(byLibrary: Partial<Record<Library, PhaseResult[]>>): { ratio: number; best: Library }[] {
  const ops = (r: PhaseResult | undefined) =>
    r?.kind === 'contended' ? Number.NaN : (r?.result.opsPerSec ?? Number.NaN)
  const mine = byLibrary.kunci ?? []
  return mine.flatMap((k, round) => {
    let best: Library | undefined
    for (const [library, results] of Object.entries(byLibrary) as [Library, PhaseResult[]][])
      if (library !== 'kunci' && (best === undefined || ops(results[round]) > ops(byLibrary[best]![round])))
        best = library
    return best === undefined ? [] : [{ ratio: ops(k) / ops(byLibrary[best]![round]), best }]
  })
}

await main()
