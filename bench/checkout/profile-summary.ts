/**
 * Summarizes the .cpuprofile files of `run.ts --profile DIR` (one per process of a target: the
 * service's primary, its instances, the worker): for each process that did work, the top
 * self-time functions and the self time by area (the service's code, each npm package, Node's
 * internals, GC), as markdown.
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

function summarize(file: string, top: number): { kind: string; lines: string[] } | undefined {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  // Sample i lasted until sample i+1: its time is the next delta (the last one: the mean).
  const selfUs = new Map<number, number>()
  const mean = (p.endTime - p.startTime) / Math.max(1, p.samples.length)
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i]!
    selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i + 1] ?? mean))
  }
  const fn = new Map<string, number>()
  const area = new Map<string, number>()
  let busy = 0
  let kind = 'primary'
  for (const [id, us] of selfUs) {
    const f = byId.get(id)!.callFrame
    if (f.functionName === '(idle)') continue
    busy += us
    const key = `${f.functionName || '(anonymous)'} ${where(f)}`.trim()
    fn.set(key, (fn.get(key) ?? 0) + us)
    const a = areaOf(f)
    area.set(a, (area.get(a) ?? 0) + us)
  }
  for (const n of p.nodes) {
    if (n.callFrame.url.includes('worker-process')) kind = 'worker'
    else if (n.callFrame.url.includes('routes/checkout') && kind !== 'worker') kind = 'instance'
  }
  const wallS = (p.endTime - p.startTime) / 1e6
  if (busy < 0.5e6) return undefined
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1)} %`
  const lines = [
    `**${kind}** (\`${file.split('/').pop()}\`): ${(busy / 1e6).toFixed(1)} s busy of ${wallS.toFixed(0)} s`,
    '',
    '| self time by area | share |',
    '|---|---:|',
    ...[...area]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([k, v]) => `| ${k} | ${pct(v)} |`),
    '',
    '| top self-time functions | share |',
    '|---|---:|',
    ...[...fn]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, v]) => `| \`${k.replaceAll('|', '\\|')}\` | ${pct(v)} |`),
  ]
  return { kind, lines }
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
const out: string[] = []
for (const name of readdirSync(dir).filter((n) => n.endsWith('.cpuprofile'))) {
  const s = summarize(join(dir, name), Number(values.top))
  if (s) out.push(...s.lines, '')
}
process.stdout.write(`${out.join('\n')}\n`)
