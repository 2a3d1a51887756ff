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
}

export interface StormSample {
  target: 'standalone' | 'cluster'
  contender: ContenderName
  rep: number
  loaderCalls: number
  errors: number
}

interface Env {
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
const range = (xs: number[]) => `${int(median(xs))} (${int(Math.min(...xs))}–${int(Math.max(...xs))})`

export function formatResults(env: Env, hits: HitSample[], storms: StormSample[]): string {
  const lines: string[] = []
  lines.push('# Cache benchmark results', '')
  lines.push('Reproduce (from the repository root, nothing else running):', '')
  lines.push('```sh', 'npx tsx bench/cache/run.ts', '```', '')
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
    lines.push('| contender | hit throughput, ops/s | hit p99, µs | loader calls while measuring |')
    lines.push('|---|---:|---:|---:|')
    const names = [...new Set(hits.filter((h) => h.target === target).map((h) => h.contender))]
    for (const name of names) {
      const s = hits.filter((h) => h.target === target && h.contender === name)
      lines.push(
        `| ${name} | ${range(s.map((x) => x.ops))} | ${range(s.map((x) => x.p99Us))} | ${s.reduce((a, x) => a + x.loads, 0)} |`,
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
  )
  return lines.join('\n')
}

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
  const l1ratio = l1 / med(best)
  out.push(
    l1ratio >= 10
      ? `- L1 target met: kunci+L1 ${int(l1)} ops/s = ×${l1ratio.toFixed(1)} the best peer with L2 alone (≥ ×10).`
      : `- L1 target MISSED: kunci+L1 ${int(l1)} ops/s = ×${l1ratio.toFixed(1)} the best peer with L2 alone (target ×10).`,
  )
  out.push(
    `- For reference, bentocache+L1: ${int(med('bentocache+L1'))} ops/s (kunci+L1 ×${(l1 / med('bentocache+L1')).toFixed(2)}).`,
  )
  return out
}
