/**
 * Rewrites the generated sections of bench/RESULTS.md from the JSON the benchmarks wrote
 * (bench/results/*.json), so that no figure there is typed by hand and each says the date and
 * commit of its run. A section sits between `<!-- generated:<name> -->` and
 * `<!-- /generated:<name> -->`; the prose around it is left alone.
 *
 *   npm run bench:render            rewrite bench/RESULTS.md
 *   npm run bench:render -- --check exit 1 if it is not what the JSON gives (the unit test does the same)
 *
 * Ratios are printed with as many decimals as it takes for the printed figure to fall on the same
 * side of the requirement as the measured one: 0.2512 against "≤ 0.25×" prints 0.251×, never 0.25×.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url))
export const RESULTS_MD = fileURLToPath(new URL('../RESULTS.md', import.meta.url))

/** A lock target as bench/locks/report.ts writes it into the run's JSON (`targets`). */
interface LockTarget {
  id: string
  label: string
  kunci: number | null
  bestPeer?: string
  bestPeerValue: number | null
  ratio: number | null
  required: string
  verdict: 'PASS' | 'MISS' | 'n/a'
  shortfall: number | null
}

interface LocksRun {
  file: string
  environment: { date: string; commit: string; uncommitted?: string[]; loadAverageAtStart?: number[] }
  quick: boolean
  phases: string[]
  rounds: number
  durationSec: number
  targets: LockTarget[]
  /** --link-ms: what each node's delay link added to a round trip (absent or null: loopback). */
  link?: { addedMs: number[] } | null
  /** --c1-interleaved: kunci's C=1 ops/s over the best peer's, the libraries taking turns. */
  c1Interleaved?: { kunciOverBest?: { ratio: number; best: string } } | null
}

interface CacheHit {
  target: 'standalone' | 'cluster'
  contender: string
  ops: number
}
interface CacheStorm {
  target: 'standalone' | 'cluster'
  contender: string
  loaderCalls: number
}
interface CacheRun {
  file: string
  env: { date: string; commit: string; params: Record<string, number> }
  hits: CacheHit[]
  storms: CacheStorm[]
}

interface Spread {
  median: number
  min: number
  max: number
}
/** A run of bench/checkout/wrk.ts: its per-shape summary. */
interface WrkRun {
  file: string
  env: { date: string; commit: string }
  load: { threads: number; connections: number; seconds: number }
  rounds: number
  /** --route-env: the third target's settings (instead of REFUSAL_LANE=false). */
  routeEnv?: Record<string, string>
  summary: {
    shape: string
    bareRps: Spread
    soldoutRps: Spread
    ratio: Spread
    bareP99Ms: Spread
    soldoutP99Ms: Spread
    p99Ratio: Spread
    masterCommandsPerRequest: Spread
    scriptCallsPerRequest: Spread
    allRefused: boolean
    /** --route: the service with REFUSAL_LANE=false (or routeEnv), in the same rounds. */
    routeRatio?: Spread
    routeScriptCallsPerRequest?: Spread
  }[]
}

export interface Results {
  locks: LocksRun[]
  cache: CacheRun[]
  wrk: WrkRun[]
}

/** Every run's JSON in `dir`, oldest first (by the date the run recorded). */
export function readResults(dir = RESULTS_DIR): Results {
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'))
  const load = <T>(f: string): T => ({ file: f, ...JSON.parse(readFileSync(`${dir}/${f}`, 'utf8')) }) as T
  const locks = files
    .filter((f) => f.startsWith('locks-'))
    .map((f) => {
      const r = load<LocksRun & { settings: { rounds: number } }>(f)
      return { ...r, rounds: r.settings.rounds }
    })
    .sort((a, b) => a.environment.date.localeCompare(b.environment.date))
  const cache = files
    .filter((f) => f.startsWith('cache-'))
    .map((f) => load<CacheRun>(f))
    .sort((a, b) => a.env.date.localeCompare(b.env.date))
  const wrk = files
    .filter((f) => f.startsWith('checkout-wrk-'))
    .map((f) => load<WrkRun>(f))
    .sort((a, b) => a.env.date.localeCompare(b.env.date))
  return { locks, cache, wrk }
}

/** `ratio` against `factor` with `better`: as few decimals (≥ 2) as keep the printed value on the measured side. */
export function formatRatio(ratio: number, factor: number, better: 'higher' | 'lower'): string {
  if (!Number.isFinite(ratio)) return '–'
  const meets = (x: number) => (better === 'higher' ? x >= factor : x <= factor)
  for (let decimals = 2; decimals < 8; decimals++) {
    const shown = Number(ratio.toFixed(decimals))
    if (meets(shown) === meets(ratio)) return `${ratio.toFixed(decimals)}×`
  }
  return `${ratio}×`
}

/** The factor and direction of a requirement as the lock harness writes it: "≥ 1.1×", "≤ 0.25× (1/4)". */
export function parseRequired(required: string): { factor: number; better: 'higher' | 'lower' } {
  const m = /^([≥≤])\s*([\d.]+)×/.exec(required)
  if (!m) throw new Error(`unreadable requirement: ${required}`)
  return { factor: Number(m[2]), better: m[1] === '≥' ? 'higher' : 'lower' }
}

const int = (n: number | null) =>
  n === null || !Number.isFinite(n) ? '–' : Math.round(n).toLocaleString('en-US')
const dec1 = (n: number | null) =>
  n === null || !Number.isFinite(n)
    ? '–'
    : n.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 })
/** '2026-12-01 12:06 UTC'. */
const when = (iso: string) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`
const short = (commit: string) => commit.slice(0, 7)

function lockCell(t: LockTarget): string {
  if (t.ratio === null || t.verdict === 'n/a') return '–'
  const { factor, better } = parseRequired(t.required)
  return `${formatRatio(t.ratio, factor, better)} ${t.verdict}`
}

const isFull = (r: LocksRun) => !r.quick && r.phases.length === 5 && !r.link

/** The phases a run measured ('all' for a full run), and its interleaved C=1 ratio if it has one. */
function phasesCell(r: LocksRun): string {
  const parts = isFull(r) ? ['all'] : [...r.phases]
  const i = r.c1Interleaved?.kunciOverBest
  if (i) parts.push(`C=1 interleaved: kunci ${i.ratio.toFixed(3)}× ${i.best}`)
  return parts.join(', ')
}

/** ', links +0.5–1 ms' for a run with --link-ms: its ratios are not loopback's. */
function linkNote(r: LocksRun): string {
  const added = r.link?.addedMs
  if (!added?.length) return ''
  const lo = Math.min(...added)
  const hi = Math.max(...added)
  return `, links +${lo === hi ? lo : `${lo}–${hi}`} ms`
}

/** The latest full lock run's targets, then every lock run's ratios. */
export function renderLocks(runs: readonly LocksRun[]): string {
  const full = runs.filter(isFull)
  const latest = full[full.length - 1]
  const out: string[] = []
  if (latest) {
    const e = latest.environment
    out.push(
      `**Latest full run: ${when(e.date)}, commit \`${short(e.commit)}\`${e.uncommitted?.length ? ' (+ uncommitted changes)' : ''}, ` +
        `${latest.rounds} rounds, ${latest.durationSec} s, load average ${e.loadAverageAtStart?.map((x) => x.toFixed(1)).join(' / ') ?? '?'} at start ` +
        `(\`bench/results/${latest.file}\`).** kunci median ÷ best peer median; the requirement is the one the harness gates on.`,
      '',
      '| target | kunci | best peer | ratio | required | result | short by |',
      '|---|---:|---|---:|---|---|---:|',
    )
    for (const t of latest.targets) {
      const decimals = t.id === 'b-cmds' || t.id === 'b-wait' ? dec1 : int
      const { factor, better } = parseRequired(t.required)
      const shortBy =
        t.verdict === 'MISS' && t.shortfall !== null ? `${(t.shortfall * 100).toFixed(1)} %` : ''
      out.push(
        `| ${t.label} | ${decimals(t.kunci)} | ${t.bestPeer ?? '–'} ${decimals(t.bestPeerValue)} | ` +
          `${t.ratio === null ? '–' : formatRatio(t.ratio, factor, better)} | ${t.required} | ${t.verdict} | ${shortBy} |`,
      )
    }
    out.push('')
  }
  const ids = runs[0]?.targets.map((t) => t.id) ?? []
  const labels = runs[0]?.targets.map((t) => `${t.label} (${t.required})`) ?? []
  out.push(
    'Every run in `bench/results/` (oldest first; a partial run measured only some phases):',
    '',
    `| run (UTC) | commit | phases | ${labels.join(' | ')} |`,
    `|---|---|---|${ids.map(() => '---:').join('|')}|`,
  )
  for (const r of runs) {
    const cells = ids.map((id) => {
      const t = r.targets.find((x) => x.id === id)
      return t ? lockCell(t) : '–'
    })
    out.push(
      `| ${when(r.environment.date)} | \`${short(r.environment.commit)}\` | ${phasesCell(r)}${r.quick ? ' (quick)' : ''}${linkNote(r)} | ${cells.join(' | ')} |`,
    )
  }
  return out.join('\n')
}

function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** One cache target of one run (the same checks as bench/cache/report.ts). */
export interface CacheTarget {
  label: string
  kunci: number
  peer: string
  peerValue: number
  ratio: number
  factor: number
  met: boolean
}

/** The cache targets of a run: L2 hits ≥ 1× and default L1 hits ≥ 10× the best peer with Redis alone, per topology. */
export function cacheTargets(run: CacheRun): CacheTarget[] {
  const out: CacheTarget[] = []
  for (const topology of ['standalone', 'cluster'] as const) {
    const med = (name: string) =>
      median(run.hits.filter((h) => h.target === topology && h.contender === name).map((h) => h.ops))
    const best = ['bentocache', 'cache-manager'].reduce((a, b) => (med(a) >= med(b) ? a : b))
    for (const [label, contender, factor] of [
      [`L2 hits, ${topology}`, 'kunci', 1],
      [`default L1 hits, ${topology}`, 'kunci+L1', 10],
    ] as const) {
      const ratio = med(contender) / med(best)
      out.push({
        label,
        kunci: med(contender),
        peer: best,
        peerValue: med(best),
        ratio,
        factor,
        met: ratio >= factor,
      })
    }
  }
  return out
}

export function renderCache(runs: readonly CacheRun[]): string {
  const latest = runs[runs.length - 1]
  if (!latest) return 'No cache run in `bench/results/`.'
  const p = latest.env.params
  const out = [
    `**Latest run: ${when(latest.env.date)}, commit \`${short(latest.env.commit)}\` (\`bench/results/${latest.file}\`), ` +
      `${p.reps} × ${p.seconds} s per contender, ${p.concurrency} callers.** Hit rows are ops/s, medians; ` +
      'ratios are kunci ÷ the best peer with Redis (L2) alone.',
    '',
    '| target | kunci | best peer (L2 alone) | ratio | required | result |',
    '|---|---:|---|---:|---|---|',
  ]
  for (const t of cacheTargets(latest))
    out.push(
      `| ${t.label} | ${int(t.kunci)} | ${t.peer} ${int(t.peerValue)} | ${formatRatio(t.ratio, t.factor, 'higher')} | ≥ ${t.factor}× | ${t.met ? 'met' : 'MISSED'} |`,
    )
  const storms = latest.storms.filter((s) => s.contender === 'kunci')
  const one = storms.every((s) => s.loaderCalls === 1)
  out.push(
    `| cold-key storm, 4 processes × 250 \`getOrSet\`, loader calls | ${one ? `1 in all ${storms.length} storms` : storms.map((s) => s.loaderCalls).join(', ')} | | | exactly 1 | ${one ? 'met' : 'MISSED'} |`,
    '',
    'Every run in `bench/results/` (oldest first):',
    '',
    `| run (UTC) | commit | ${cacheTargets(latest)
      .map((t) => `${t.label} (≥ ${t.factor}×)`)
      .join(' | ')} | storm: kunci's loader calls |`,
    `|---|---|${cacheTargets(latest)
      .map(() => '---:')
      .join('|')}|---|`,
  )
  for (const r of runs) {
    const cells = cacheTargets(r).map(
      (t) => `${formatRatio(t.ratio, t.factor, 'higher')} ${t.met ? 'met' : 'MISSED'}`,
    )
    const calls = [...new Set(r.storms.filter((s) => s.contender === 'kunci').map((s) => s.loaderCalls))]
    out.push(
      `| ${when(r.env.date)} | \`${short(r.env.commit)}\` | ${cells.join(' | ')} | ${calls.join(', ')} |`,
    )
  }
  return out.join('\n')
}

/** The latest wrk run of the sold-out flood, shape by shape (bench/checkout/wrk.ts). */
export function renderWrk(runs: readonly WrkRun[]): string {
  const latest = runs[runs.length - 1]
  if (!latest) return 'No wrk run in `bench/results/`.'
  const f = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : '–')
  const range = (x: Spread, d: number) => `${f(x.median, d)} (${f(x.min, d)}–${f(x.max, d)})`
  const out = [
    `**Latest run: ${when(latest.env.date)}, commit \`${short(latest.env.commit)}\` (\`bench/results/${latest.file}\`), ` +
      `wrk ${latest.load.threads} threads × ${latest.load.connections} connections, ${latest.rounds} paired rounds of ${latest.load.seconds} s.** ` +
      'The service (lua, 2 instances, its sale sold out before each run) against the bare fastify server, same requests; medians (min–max).',
    '',
    '| shape | service ÷ bare, req/s (≥ 0.9×) | p99 service ÷ bare (≤ 1.5×) | service req/s | script calls per request | master commands per request | every answer a refusal |',
    '|---|---:|---:|---:|---:|---:|---|',
  ]
  for (const x of latest.summary)
    out.push(
      `| ${x.shape} | ${formatRatio(x.ratio.median, 0.9, 'higher')} ${x.ratio.median >= 0.9 ? 'met' : 'MISSED'} | ${formatRatio(x.p99Ratio.median, 1.5, 'lower')} | ${range(x.soldoutRps, 0)} | ${f(x.scriptCallsPerRequest.median, 4)} | ${f(x.masterCommandsPerRequest.median, 3)} | ${x.allRefused ? 'yes' : 'NO'} |`,
    )
  const routed = latest.summary.filter((x) => x.routeRatio !== undefined)
  const calls = (x: (typeof routed)[number]) =>
    x.routeScriptCallsPerRequest && x.routeScriptCallsPerRequest.median >= 0
      ? ` (${f(x.routeScriptCallsPerRequest.median, 4)} script calls per request)`
      : ''
  const settings = latest.routeEnv
    ? `With ${Object.entries(latest.routeEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ')} (a third target in the same rounds)`
    : 'Without the refusal lane (REFUSAL_LANE=false, the same answers through the fastify route)'
  if (routed.length > 0)
    out.push(
      '',
      `${settings}, same rounds: ${routed.map((x) => `${x.shape} ${f(x.routeRatio!.median, 2)}× bare${calls(x)}`).join(', ')}.`,
    )
  return out.join('\n')
}

/** The generated sections, by marker name. */
export function renderSections(results: Results): Record<string, string> {
  return {
    'locks-targets': renderLocks(results.locks),
    'cache-targets': renderCache(results.cache),
    'checkout-wrk': renderWrk(results.wrk),
  }
}

const open = (name: string) => `<!-- generated:${name} -->`
const close = (name: string) => `<!-- /generated:${name} -->`

/** The text between a section's markers (trimmed), or undefined if the markdown has none. */
export function sectionOf(markdown: string, name: string): string | undefined {
  const start = markdown.indexOf(open(name))
  const end = markdown.indexOf(close(name))
  if (start < 0 || end < start) return undefined
  return markdown.slice(start + open(name).length, end).trim()
}

/** `markdown` with each named section replaced; a section without its markers is an error. */
export function replaceSections(markdown: string, sections: Record<string, string>): string {
  let out = markdown
  for (const [name, body] of Object.entries(sections)) {
    const start = out.indexOf(open(name))
    const end = out.indexOf(close(name))
    if (start < 0 || end < start) throw new Error(`bench/RESULTS.md has no ${open(name)} … ${close(name)}`)
    out = `${out.slice(0, start + open(name).length)}\n${body}\n${out.slice(end)}`
  }
  return out
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const before = readFileSync(RESULTS_MD, 'utf8')
  const after = replaceSections(before, renderSections(readResults()))
  if (process.argv.includes('--check')) {
    if (after !== before) {
      console.error('bench/RESULTS.md is not what bench/results/*.json give: run npm run bench:render')
      process.exit(1)
    }
  } else if (after !== before) {
    writeFileSync(RESULTS_MD, after)
    console.error('bench/RESULTS.md: generated sections rewritten')
  } else console.error('bench/RESULTS.md: up to date')
}
