import type { Library, LockDriver } from './driver.js'
import { percentile, type Spread, spread } from './stats.js'

/** One library's share of an interleaved C=1 run. */
export interface InterleavedLibrary {
  library: Library
  operations: number
  /** Operations per second of its own time: count ÷ the summed duration of its operations. */
  opsPerSec: number
  /** Of one acquire+release, in ms. */
  p50Ms: number
  p99Ms: number
}

export interface InterleavedResult {
  seconds: number
  burst: number
  blocks: number
  libraries: InterleavedLibrary[]
  /** kunci's ops/s over the best peer's over the whole run, and the spread of that ratio per block. */
  kunciOverBest: { ratio: number; best: Library } | undefined
  blockRatios: Spread | undefined
}

/**
 * Operations per library per turn. One at a time is biased: with five libraries each operation
 * finds its library's code and data evicted by the four others (after ~12 ms of their work), and
 * the library that touches the most pays the most. kunci measured 0.944× node-redlock that way
 * with all five libraries and 0.978× with two, on the same +1 ms links; in bursts of 20 (~60 ms)
 * every library runs warm, as in a service, and the turns are still short enough for the
 * machine's drift to land on all of them alike.
 */
const BURST = 20

/**
 * C=1 with the libraries taking turns in short bursts (kunci, node-redlock, …, rotated every
 * turn), each library timed only while it runs. Rounds of a second per library (run.ts's a-c1)
 * swing by ±5 % on a shared machine, more than a 1–2 % difference between two libraries;
 * interleaved, every drift of the machine lands on all of them alike. Every library uses its own
 * keys and connections; one acquire+release is one operation.
 */
export async function runInterleaved(
  drivers: ReadonlyMap<Library, LockDriver>,
  seconds: number,
  { burst = BURST, blocks = 10 }: { burst?: number; blocks?: number } = {},
): Promise<InterleavedResult> {
  const libraries = [...drivers.keys()]
  const durations = new Map<Library, number[]>(libraries.map((l) => [l, []]))
  const once = async (library: Library, key: string) => {
    const t = performance.now()
    await (await drivers.get(library)!.acquire(key)).release()
    return performance.now() - t
  }
  for (let i = 0; i < 200; i++) for (const l of libraries) await once(l, `interleaved:${l}:warm:${i}`)
  const blockTotals: Map<Library, { ms: number; n: number }>[] = []
  const start = performance.now()
  const end = start + seconds * 1000
  const blockMs = (seconds * 1000) / blocks
  let turn = 0
  for (let now = start; now < end; now = performance.now()) {
    const block = Math.min(blocks - 1, Math.floor((now - start) / blockMs))
    const totals = (blockTotals[block] ??= new Map(libraries.map((l) => [l, { ms: 0, n: 0 }])))
    for (let j = 0; j < libraries.length; j++) {
      const library = libraries[(turn + j) % libraries.length]!
      const t = totals.get(library)!
      for (let k = 0; k < burst; k++) {
        const ms = await once(library, `interleaved:${library}:${turn}:${k}`)
        durations.get(library)!.push(ms)
        t.ms += ms
        t.n++
      }
    }
    turn++
  }
  const rate = (ms: readonly number[]) => (ms.length / ms.reduce((a, b) => a + b, 0)) * 1000
  const out: InterleavedLibrary[] = libraries.map((library) => {
    const ms = durations.get(library)!
    return {
      library,
      operations: ms.length,
      opsPerSec: rate(ms),
      p50Ms: percentile(ms, 50),
      p99Ms: percentile(ms, 99),
    }
  })
  const kunci = out.find((l) => l.library === 'kunci')
  const peers = out.filter((l) => l.library !== 'kunci')
  const best = peers.reduce<InterleavedLibrary | undefined>(
    (b, l) => (!b || l.opsPerSec > b.opsPerSec ? l : b),
    undefined,
  )
  const perBlock =
    kunci && best
      ? blockTotals
          .filter((b) => b !== undefined)
          .map((b) => {
            const k = b.get('kunci')!
            const p = b.get(best.library)!
            return k.n / k.ms / (p.n / p.ms)
          })
      : []
  return {
    seconds,
    burst,
    blocks,
    libraries: out,
    kunciOverBest:
      kunci && best ? { ratio: kunci.opsPerSec / best.opsPerSec, best: best.library } : undefined,
    blockRatios: perBlock.length > 0 ? spread(perBlock) : undefined,
  }
}

/** The run as a markdown table, kunci's ratio to the best peer below it. */
export function interleavedTable(r: InterleavedResult, linkNote: string): string {
  const lines = [
    `### (a) C=1, libraries interleaved in bursts of ${r.burst} operations${linkNote} (${r.seconds} s)`,
    '',
    '| library | operations | ops/s | p50 ms | p99 ms |',
    '|---|---:|---:|---:|---:|',
    ...r.libraries.map(
      (l) =>
        `| ${l.library} | ${l.operations} | ${l.opsPerSec.toFixed(1)} | ${l.p50Ms.toFixed(3)} | ${l.p99Ms.toFixed(3)} |`,
    ),
  ]
  if (r.kunciOverBest) {
    const b = r.blockRatios
    lines.push(
      '',
      `kunci ÷ best peer (${r.kunciOverBest.best}): ${r.kunciOverBest.ratio.toFixed(3)}×` +
        (b
          ? `; per block of ${(r.seconds / r.blocks).toFixed(0)} s: median ${b.median.toFixed(3)}×, ${b.min.toFixed(3)}–${b.max.toFixed(3)}`
          : ''),
    )
  }
  return lines.join('\n')
}
