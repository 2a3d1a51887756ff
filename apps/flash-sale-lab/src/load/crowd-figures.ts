// What a crowd run (modes 'crowd' and 'waiting-room') says about its users: how many requests a
// sale cost, how fair it was, and how long the users still trying took to learn it had sold out.
// The demo's comparison (room vs no room) and `flash-sale-lab load` print these.
import { percentile } from './latency.js'
import type { LoadUser, LoadUserOutcome } from './result.js'

export interface Spread {
  mean: number
  p50: number
  p99: number
  max: number
}

export interface CrowdFigures {
  users: number
  outcomes: Partial<Record<LoadUserOutcome, number>>
  /** Users who bought. */
  bought: number
  /** Requests sent for every user (joins, polls, checkouts, retries, double clicks). */
  requests: number
  requestsPerUser: Spread
  /** requests / bought; null when nobody bought. */
  requestsPerPurchase: number | null
  /**
   * Spearman's rank correlation between the order of arrival and the order of purchase, among
   * the buyers: 1 = they bought in the order they came; about 0 = arrival did not matter. Null
   * with fewer than 3 buyers.
   */
  spearman: number | null
  /** Of the first `bought` users to arrive, the share who bought: 1 = first come, first served. */
  firstArrivalsShare: number | null
  /**
   * When the sale sold out as the clients saw it: the answer of the last purchase (ms since the
   * run's start). Null when nobody was told it had sold out.
   */
  soldOutAtMs: number | null
  /**
   * Users who had arrived by then and had no final answer yet, then were told it had sold out:
   * how long after soldOutAtMs they were told (a user told before the last buyer's answer
   * arrived counts 0). Null when there were none.
   */
  lastWaiters: { count: number; p50Ms: number; maxMs: number } | null
  /** 'waiting-room': from the join to the first answer that said admitted, of the admitted. */
  waitToAdmissionMs: Spread | null
}

const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits

export function spread(values: number[]): Spread {
  if (values.length === 0) return { mean: 0, p50: 0, p99: 0, max: 0 }
  const sorted = Float64Array.from(values).sort()
  const sum = values.reduce((a, b) => a + b, 0)
  return {
    mean: round(sum / values.length, 2),
    p50: round(percentile(sorted, 50)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted[sorted.length - 1]!),
  }
}

/** 1-based ranks of `values`, ties sharing their average rank. */
export function ranks(values: readonly number[]): number[] {
  const order = values.map((v, i) => [v, i] as const).sort((a, b) => a[0] - b[0])
  const out = new Array<number>(values.length)
  for (let i = 0; i < order.length; ) {
    let j = i
    while (j + 1 < order.length && order[j + 1]![0] === order[i]![0]) j++
    const rank = (i + j) / 2 + 1
    for (let k = i; k <= j; k++) out[order[k]![1]] = rank
    i = j + 1
  }
  return out
}

/** Spearman's ρ: Pearson's correlation of the ranks (correct with ties). Null below 3 pairs or with no spread. */
export function spearman(xs: readonly number[], ys: readonly number[]): number | null {
  if (xs.length !== ys.length || xs.length < 3) return null
  const rx = ranks(xs)
  const ry = ranks(ys)
  const mean = (xs.length + 1) / 2
  let sxy = 0
  let sxx = 0
  let syy = 0
  for (let i = 0; i < rx.length; i++) {
    const dx = rx[i]! - mean
    const dy = ry[i]! - mean
    sxy += dx * dy
    sxx += dx * dx
    syy += dy * dy
  }
  if (sxx === 0 || syy === 0) return null
  return round(sxy / Math.sqrt(sxx * syy), 3)
}

export function crowdFigures(users: readonly LoadUser[]): CrowdFigures {
  const outcomes: Partial<Record<LoadUserOutcome, number>> = {}
  for (const u of users) outcomes[u.outcome] = (outcomes[u.outcome] ?? 0) + 1
  const buyers = users.filter((u) => u.outcome === 'purchased')
  const requests = users.reduce((a, u) => a + u.requests, 0)
  const byArrival = [...users].sort((a, b) => a.arrivedMs - b.arrivedMs)
  const firstN = byArrival.slice(0, buyers.length)
  const toldSoldOut = users.filter((u) => u.outcome === 'sold_out')
  const soldOutAtMs =
    toldSoldOut.length === 0 || buyers.length === 0 ? null : Math.max(...buyers.map((u) => u.outcomeMs))
  const waiters =
    soldOutAtMs === null
      ? []
      : toldSoldOut
          .filter((u) => u.arrivedMs <= soldOutAtMs)
          .map((u) => Math.max(0, u.outcomeMs - soldOutAtMs))
  const lastWaiters =
    waiters.length === 0
      ? null
      : (() => {
          const s = spread(waiters)
          return { count: waiters.length, p50Ms: s.p50, maxMs: s.max }
        })()
  const admitted = users.filter((u) => u.admittedMs !== null)
  return {
    users: users.length,
    outcomes,
    bought: buyers.length,
    requests,
    requestsPerUser: spread(users.map((u) => u.requests)),
    requestsPerPurchase: buyers.length === 0 ? null : round(requests / buyers.length, 2),
    spearman: spearman(
      buyers.map((u) => u.arrivedMs),
      buyers.map((u) => u.outcomeMs),
    ),
    firstArrivalsShare:
      buyers.length === 0
        ? null
        : round(firstN.filter((u) => u.outcome === 'purchased').length / buyers.length, 3),
    soldOutAtMs,
    lastWaiters,
    waitToAdmissionMs:
      admitted.length === 0 ? null : spread(admitted.map((u) => u.admittedMs! - u.arrivedMs)),
  }
}

/** Two lines for `flash-sale-lab load`. */
export function formatCrowd(f: CrowdFigures): string {
  const outcomes = Object.entries(f.outcomes)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ')
  const fair = `Spearman ${f.spearman ?? '-'}, first-${f.bought} arrivals who bought ${f.firstArrivalsShare === null ? '-' : `${Math.round(f.firstArrivalsShare * 100)} %`}`
  const soldOut =
    f.soldOutAtMs === null
      ? 'not sold out'
      : `sold out at ${(f.soldOutAtMs / 1000).toFixed(1)} s; ${f.lastWaiters?.count ?? 0} still waiting then, the last told ${f.lastWaiters ? `${(f.lastWaiters.maxMs / 1000).toFixed(2)} s` : '-'} later`
  return [
    `  users       ${f.users}: ${outcomes || '-'}`,
    `  per user    requests mean ${f.requestsPerUser.mean}, p50 ${f.requestsPerUser.p50}, max ${f.requestsPerUser.max}; ${f.requestsPerPurchase ?? '-'} per purchase; ${fair}; ${soldOut}`,
  ].join('\n')
}
