// One progress line per second: `flash-sale-lab load` rewrites it in place on a TTY, the demo
// composes its own from the same LoadSecond.
import type { LoadSecond } from './result.js'

const pad = (s: string, n: number) => s.padStart(n)

/** '  12s  VUs 250  1530 req/s  200:412 409:1100 429:18  p99 41.2 ms  errors 0' */
export function formatProgress(s: LoadSecond): string {
  const codes = Object.entries(s.byStatus)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([code, n]) => `${code}:${n}`)
    .join(' ')
  const p99 = s.p99Ms === null ? '   -   ' : `${s.p99Ms.toFixed(1)} ms`
  const errors = Object.values(s.totals.transportErrors).reduce((a, b) => a + b, 0)
  return `${pad(`${s.t}s`, 5)}  VUs ${pad(String(s.vus), 4)}  ${pad(String(s.requests), 5)} req/s  ${codes || '-'}  p99 ${p99}  transport errors ${errors}`
}
