/**
 * Summarizes the .cpuprofile files of `run.ts --profile DIR` (one per measured window and
 * process of a target), merged by kind of process (the service's instances, its primary, the
 * worker): the self time by area (the service's code, each npm package, Node's internals, GC)
 * and the top self-time functions, as markdown.
 *
 *   npx tsx bench/checkout/profile-summary.ts DIR/soldout [--top 25]
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
}

interface ProfileNode {
  id: number
  callFrame: CallFrame
}

interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

/** Where a function lives: the service's own code, an npm package, Node itself, or V8's bookkeeping. */
function areaOf(f: CallFrame): string {
  if (f.url === '') return f.functionName.startsWith('(') ? f.functionName : '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url)
  if (pkg) return pkg[1]!
  if (f.url.startsWith('node:')) return 'node internals'
  const ours = /(apps\/[^/]+|packages\/[^/]+)\//.exec(f.url)
  return ours ? ours[1]! : f.url
}

function where(f: CallFrame): string {
  const file = f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(apps|packages)\//, '$1/')
  return file === '' ? '' : `${file}:${f.lineNumber + 1}`
}

interface Totals {
  files: number
  busyUs: number
  wallUs: number
  fn: Map<string, number>
  area: Map<string, number>
}

/** Adds one profile's self times to the totals of its kind (instance, worker, primary). */
function addProfile(file: string, byKind: Map<string, Totals>): void {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  let kind = 'primary'
  for (const n of p.nodes) {
    if (n.callFrame.url.includes('worker-process')) kind = 'worker'
    else if (n.callFrame.url.includes('routes/checkout') && kind !== 'worker') kind = 'instance'
  }
  const t = byKind.get(kind) ?? { files: 0, busyUs: 0, wallUs: 0, fn: new Map(), area: new Map() }
  byKind.set(kind, t)
  t.files++
  t.wallUs += p.endTime - p.startTime
  // Sample i lasted until sample i+1: its time is the next delta (the last one: the mean).
  const mean = (p.endTime - p.startTime) / Math.max(1, p.samples.length)
  for (let i = 0; i < p.samples.length; i++) {
    const f = byId.get(p.samples[i]!)!.callFrame
    if (f.functionName === '(idle)') continue
    const us = p.timeDeltas[i + 1] ?? mean
    t.busyUs += us
    const key = `${f.functionName || '(anonymous)'} ${where(f)}`.trim()
    t.fn.set(key, (t.fn.get(key) ?? 0) + us)
    const a = areaOf(f)
    t.area.set(a, (t.area.get(a) ?? 0) + us)
  }
}

function format(kind: string, t: Totals, top: number): string[] {
  const pct = (us: number) => `${((100 * us) / t.busyUs).toFixed(1)} %`
  return [
    `**${kind}** (${t.files} profile(s)): ${(t.busyUs / 1e6).toFixed(1)} s busy of ${(t.wallUs / 1e6).toFixed(0)} s profiled`,
    '',
    '| self time by area | share |',
    '|---|---:|',
    ...[...t.area]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([k, v]) => `| ${k} | ${pct(v)} |`),
    '',
    '| top self-time functions | share |',
    '|---|---:|',
    ...[...t.fn]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => `| \`${k.replaceAll('|', '\\|')}\` | ${pct(v)} |`),
    '',
  ]
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' } },
})
const dir = positionals[0]
if (!dir) {
  process.stderr.write('usage: npx tsx bench/checkout/profile-summary.ts DIR [--top N]\n')
  process.exit(2)
}
const byKind = new Map<string, Totals>()
for (const name of readdirSync(dir).filter((n) => n.endsWith('.cpuprofile')))
  addProfile(join(dir, name), byKind)
const out: string[] = []
for (const kind of ['instance', 'worker', 'primary']) {
  const t = byKind.get(kind)
  if (t && t.busyUs >= 0.1e6) out.push(...format(kind, t, Number(values.top)))
}
process.stdout.write(`${out.join('\n')}\n`)
