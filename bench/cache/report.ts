/** Turns benchmark samples into bench/cache/RESULTS.md: medians with min–max, and the target checks. */
import type { ContenderName } from './contenders.js'

export interface HitSample {
  target: 'standalone' | 'cluster'
  contender: ContenderName
  rep: number
  ops: number
  p99Us: number
  /** Loader calls during the sample: 0 means every call was a hit. */
  loads: number
  /** The slowest call of the sample (absent in runs before issue 9). */
  maxUs?: number
}

export interface StormSample {
  target: 'standalone' | 'cluster'
  contender: ContenderName
  rep: number
  loaderCalls: number
  errors: number
}

export interface Env {
  date: string
  commit: string
  node: string
  redis: string
  cpu: string
  memoryGb: number
  versions: Record<string, string>
  params: Record<string, number>
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

const int = (n: number) => Math.round(n).toLocaleString('en-US')
/** Median (max) over the repetitions of each sample's slowest call, in ms. */
const slowest = (s: HitSample[]) => {
  const xs = s.flatMap((x) => (x.maxUs === undefined ? [] : [x.maxUs / 1000]))
  return xs.length === 0 ? '–' : `${median(xs).toFixed(1)} (${Math.max(...xs).toFixed(1)})`
}
const range = (xs: number[]) => `${int(median(xs))} (${int(Math.min(...xs))}–${int(Math.max(...xs))})`

/** Hand-written notes between these markers survive a re-render (run.ts keeps them). */
export const PREFACE_START = '<!-- notes: kept when this page is re-rendered -->'
export const PREFACE_END = '<!-- /notes -->'

/** The hand-written notes of an existing RESULTS.md, markers included, or ''. */
export function prefaceOf(markdown: string): string {
  const start = markdown.indexOf(PREFACE_START)
  const end = markdown.indexOf(PREFACE_END)
  return start >= 0 && end > start ? markdown.slice(start, end + PREFACE_END.length) : ''
}

export function formatResults(env: Env, hits: HitSample[], storms: StormSample[], preface = ''): string {
  const lines: string[] = []
  lines.push('# Cache benchmark results', '')
  if (preface !== '') lines.push(preface, '')
  lines.push('Reproduce (from the repository root, nothing else running):', '')
  const p = env.params
  lines.push(
    '```sh',
    `npx tsx bench/cache/run.ts --reps ${p.reps} --seconds ${p.seconds} --concurrency ${p.concurrency} ` +
      `--storm-reps ${p.stormReps}`,
    '```',
    '',
    'Raw samples of the run: `bench/results/cache-<date>-<commit>.json`; ' +
      '`npx tsx bench/cache/run.ts --render <that file>` rewrites this page from them.',
    '',
  )
  lines.push('## Environment', '')
  lines.push(`- ${env.date}, commit ${env.commit}`)
  lines.push(
    `- Node ${env.node}, Redis ${env.redis}, ${env.cpu}, ${env.memoryGb} GB RAM (shared with other work)`,
  )
  lines.push(
    `- ${Object.entries(env.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  )
  lines.push(
    `- ${env.params.keys} keys, ${env.params.concurrency} concurrent async callers in one process, ` +
      `${env.params.reps} interleaved repetitions of ${env.params.seconds} s per contender and topology; ` +
      `storm: ${env.params.stormReps} repetitions`,
    '',
  )
  for (const target of ['standalone', 'cluster'] as const) {
    lines.push(`## Hits on ${target === 'standalone' ? 'a standalone Redis' : 'a 3+3 Redis Cluster'}`, '')
    lines.push('Median (min–max) over the repetitions.', '')
    lines.push(
      '| contender | hit throughput, ops/s | hit p99, µs | slowest hit, ms | loader calls while measuring |',
    )
    lines.push('|---|---:|---:|---:|---:|')
    const names = [...new Set(hits.filter((h) => h.target === target).map((h) => h.contender))]
    for (const name of names) {
      const s = hits.filter((h) => h.target === target && h.contender === name)
      lines.push(
        `| ${name} | ${range(s.map((x) => x.ops))} | ${range(s.map((x) => x.p99Us))} | ` +
          `${slowest(s)} | ${s.reduce((a, x) => a + x.loads, 0)} |`,
      )
    }
    lines.push('', ...targetChecks(target, hits), '')
  }
  lines.push('## Cold-key storm: 4 OS processes × 250 concurrent getOrSet, loader 100 ms', '')
  lines.push('| topology | library | loader calls, median (min–max) | errors |')
  lines.push('|---|---|---:|---:|')
  for (const target of ['standalone', 'cluster'] as const) {
    const names = [...new Set(storms.filter((s) => s.target === target).map((s) => s.contender))]
    for (const name of names) {
      const s = storms.filter((x) => x.target === target && x.contender === name)
      lines.push(
        `| ${target} | ${name} | ${range(s.map((x) => x.loaderCalls))} | ${s.reduce((a, x) => a + x.errors, 0)} |`,
      )
    }
  }
  const kunciStorms = storms.filter((s) => s.contender === 'kunci')
  lines.push(
    '',
    kunciStorms.every((s) => s.loaderCalls === 1)
      ? `Target met: kunci made exactly 1 loader call in all ${kunciStorms.length} storms.`
      : `Target MISSED: kunci loader calls per storm: ${kunciStorms.map((s) => s.loaderCalls).join(', ')}.`,
    '',
    ...NOTES,
  )
  return lines.join('\n')
}

const NOTES = [
  '## Method and caveats',
  '',
  '- One machine with 2 shared cores runs the redis-server processes (1, or 6 for the cluster), the benchmark ' +
    'process and other work: absolute numbers move by ±20 % between runs. Contenders are interleaved in a ' +
    'rotating order within each repetition so that drift hits all of them alike; compare medians within a run.',
  '- Same workload for all: 1,000 warm keys, a ~130-byte JSON object each, random key per call, through each ' +
    "library's read-through call (kunci `getOrSet`, bentocache `getOrSet`, cache-manager `wrap`).",
  '- Clients: kunci and bentocache share the same ioredis configuration with `enableAutoPipelining: true`; ' +
    'cache-manager uses @keyv/redis, i.e. node-redis, which pipelines commands of one tick by default. ' +
    'bentocache runs without its bus (one process; the bus adds no work to a hit). TTLs are 10 minutes, so ' +
    'no refresh happens while measuring (the loader-call column checks it).',
  '- L1 rows: `kunci+L1` and `bentocache+L1` use each library’s default, which serialises L1 entries so ' +
    'callers never share an object (kunci since issue 9: parses an entry once and hands each hit a deep copy ' +
    'of it; bentocache: JSON.parse per hit); the `by-ref` rows keep the objects (`l1Serialize: false`, ' +
    'bentocache `serialize: false`).',
  '- Slowest hit: the median over the repetitions of each sample’s slowest call, and in brackets the worst. ' +
    'An L1 hit resolves in microtasks alone, so 64 callers never yield to the event loop during an L1 sample: ' +
    'only a GC pause or the OS not scheduling the process (2 shared cores) can make one slow, and then all 64 ' +
    'callers stall together (bench/cache/profile.ts reports each stall with the process CPU it got).',
  '- Why a target can be missed here: the redis-server processes share the 2 cores with the client, so L2 ' +
    'numbers move by ±20 % between runs; see the profile in the "Issue 9" notes above for where a hit’s time goes.',
  '- Storm: each process connects and warms up before a common start signal; loader calls are counted with ' +
    'INCR in Redis by the loader itself.',
  '',
]

function targetChecks(target: 'standalone' | 'cluster', hits: HitSample[]): string[] {
  const med = (name: ContenderName) =>
    median(hits.filter((h) => h.target === target && h.contender === name).map((h) => h.ops))
  const peers: ContenderName[] = ['bentocache', 'cache-manager']
  const best = peers.reduce((a, b) => (med(a) >= med(b) ? a : b))
  const l2 = med('kunci')
  const l1 = med('kunci+L1')
  const out: string[] = []
  const ratio = l2 / med(best)
  out.push(
    ratio >= 1
      ? `- L2 target met: kunci ${int(l2)} ops/s ≥ best peer with L2 alone (${best}, ${int(med(best))}), ×${ratio.toFixed(2)}.`
      : `- L2 target MISSED: kunci ${int(l2)} ops/s is ${((1 - ratio) * 100).toFixed(1)}% below ${best} (${int(med(best))}).`,
  )
  const copy = med('kunci (ioredis 6 copy)')
  if (Number.isFinite(copy))
    out.push(
      `- On another copy of ioredis (6.0 beside the 5.x kunci resolves): kunci ${int(copy)} ops/s = ×${(copy / l2).toFixed(2)} kunci on its own copy (target ≥ ×0.95: the same fast path).`,
    )
  const l1ratio = l1 / med(best)
  out.push(
    l1ratio >= 10
      ? `- L1 target met: kunci+L1 ${int(l1)} ops/s = ×${l1ratio.toFixed(1)} the best peer with L2 alone (≥ ×10).`
      : `- L1 target MISSED: kunci+L1 ${int(l1)} ops/s = ×${l1ratio.toFixed(1)} the best peer with L2 alone (target ×10).`,
  )
  const byRef = med('kunci+L1 by-ref')
  const byRefRatio = byRef / med(best)
  out.push(
    `- With \`l1Serialize: false\` (objects shared by reference): kunci+L1 by-ref ${int(byRef)} ops/s = ` +
      `×${byRefRatio.toFixed(1)} the best peer with L2 alone (${byRefRatio >= 10 ? 'meets' : 'misses'} ×10).`,
  )
  out.push(
    `- Against the peer's own L1: kunci+L1 ×${(l1 / med('bentocache+L1')).toFixed(1)} bentocache+L1, ` +
      `kunci+L1 by-ref ×${(byRef / med('bentocache+L1 by-ref')).toFixed(1)} bentocache+L1 by-ref.`,
  )
  return out
}
