import { randomInt } from 'node:crypto'

// The seeded half of the fault generator (issue 37, STYLE.md §14): a PRNG, the sales a seed opens,
// what each client does and when, and the faults and when they strike. Everything random in a run
// comes from here, from the seed, so `FAULT_SEED=<n>` replays the same choices (the same sales,
// users, keys, operations, faults and pauses); what no seed fixes is how the processes interleave.

/** mulberry32: 32 bits of state, fast, good enough to pick operations; never for secrets. */
export class Prng {
  #s: number
  constructor(seed: number) {
    this.#s = seed >>> 0
  }
  /** In [0, 1). */
  next(): number {
    this.#s = (this.#s + 0x6d2b79f5) >>> 0
    let t = this.#s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('pick from an empty list')
    return xs[Math.floor(this.next() * xs.length)]!
  }
  /** One of `weights`' keys, each with its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][]
    let r = this.next() * entries.reduce((s, [, w]) => s + w, 0)
    for (const [k, w] of entries) {
      r -= w
      if (r < 0) return k
    }
    return entries.at(-1)![0]
  }
  /** A 128-bit key in UUID form, from this stream (replayable, unlike randomUUID). */
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => this.int(0, 15).toString(16)).join('')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`
  }
  /** An independent stream for one part of the run (a client, the faults), so parts do not shift each other. */
  fork(label: string): Prng {
    let h = this.#s ^ 0x9e3779b9
    for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193)
    return new Prng(h >>> 0)
  }
}

/** The seeds of this run: FAULT_SEED alone, or the fixed seeds then fresh ones up to `count`. */
export function seedsOfRun(env: string | undefined, fixed: readonly number[], count: number): number[] {
  if (env !== undefined && env !== '')
    return env.split(',').map((s) => {
      const n = Number(s)
      if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`FAULT_SEED: ${s} is not a uint32`)
      return n
    })
  const seeds = [...fixed]
  while (seeds.length < count) seeds.push(randomInt(1, 2 ** 31))
  return seeds
}

/** One sale (one round of a product) as the generator opens it. */
export interface SalePlan {
  stock: number
  perUserLimit: 1 | 2 | 3
  payment: 'instant' | 'hold'
  /** Hold sales only: short, so that expiry happens within the run. */
  holdSeconds?: number
  /** This round resets the previous sale's product (a new round of it) instead of a new product. */
  reset: boolean
  /** Users who may buy in it (a small pool, so limits and sell-outs matter). */
  users: number[]
}

export type FaultKind =
  | 'kill-worker'
  | 'kill-instance'
  | 'kill-master'
  | 'stop-replica'
  | 'client-kill-storm'
  | 'partition-a'
  | 'partition-b'
  | 'partition-c'
  | 'partition-d'
  | 'partition-e'
  | 'sql-outage'

/** One fault of the schedule: what, after how long a pause, with its own parameters. */
export interface FaultPlan {
  kind: FaultKind
  /** Pause before it (after the previous fault was undone). */
  pauseMs: number
  /** How long it lasts (a stopped replica, a storm, a dead worker); kill-master and partitions take what they take. */
  holdMs: number
  /** client-kill-storm: between two CLIENT KILLs. */
  everyMs: number
}

export type OpKind = 'checkout' | 'repeat-key' | 'pay-or-cancel' | 'refund' | 'restock'

export interface GeneratorOptions {
  /** How long the operations run. */
  loadMs: number
  /** Concurrent clients. */
  clients: number
  /** Users of the run: ids from `firstUser`. */
  firstUser: number
  users: number
  /** Fault kinds to draw from (a stack without the solo instance cannot run some). */
  faults: Readonly<Partial<Record<FaultKind, number>>>
}

/** Everything a seed decides before the run starts (the clients draw their operations as they go). */
export interface SeedPlan {
  seed: number
  sales: SalePlan[]
  /** Pause between two sales. */
  saleEveryMs: number
  faults: FaultPlan[]
  /** Users whose wallet cannot pay (INSUFFICIENT_FUNDS) and users with one unit's money. */
  brokeUsers: number[]
  poorUsers: number[]
}

export function planSeed(seed: number, o: GeneratorOptions): SeedPlan {
  const root = new Prng(seed)
  const s = root.fork('sales')
  const users = Array.from({ length: o.users }, (_, i) => o.firstUser + i)
  const saleEveryMs = s.int(7_000, 11_000)
  const count = Math.max(1, Math.ceil(o.loadMs / saleEveryMs))
  let resets = 0
  const sales: SalePlan[] = []
  for (let i = 0; i < count; i++) {
    const stock = s.int(3, 10)
    const perUserLimit = s.pick([1, 2, 3] as const)
    const payment = s.chance(0.45) ? 'hold' : 'instant'
    // At most two resets a seed: a reset is a new round of the sale before it, and its 200s are
    // where item 8's stale_round hides.
    const reset = i > 0 && resets < 2 && s.chance(0.25)
    if (reset) resets++
    const pool = Math.min(users.length, stock + s.int(2, 6))
    const start = s.int(0, users.length - pool)
    sales.push({
      stock,
      perUserLimit,
      payment,
      ...(payment === 'hold' && { holdSeconds: s.int(2, 5) }),
      reset,
      users: users.slice(start, start + pool),
    })
  }
  const f = root.fork('faults')
  const faults: FaultPlan[] = []
  // Enough faults to fill the load with pauses between; those left over when it ends are not run.
  for (let t = 0; t < o.loadMs; ) {
    const kind = f.weighted(o.faults as Record<FaultKind, number>)
    const pauseMs = f.int(1_000, 4_000)
    const holdMs = kind === 'stop-replica' ? f.int(1_000, 3_000) : f.int(300, 2_500)
    faults.push({ kind, pauseMs, holdMs, everyMs: f.int(30, 250) })
    t += pauseMs + holdMs + (kind === 'kill-master' || kind.startsWith('partition') ? 6_000 : 1_000)
  }
  const w = root.fork('wallets')
  const brokeUsers = users.filter(() => w.chance(0.08))
  const poorUsers = users.filter((u) => !brokeUsers.includes(u) && w.chance(0.08))
  return { seed, sales, saleEveryMs, faults, brokeUsers, poorUsers }
}

/** What one client does next, drawn from its own stream. */
export function nextOp(p: Prng): OpKind {
  // repeat-key: a key that already has an answer, sent again seconds later (a reload, an answer
  // lost on the way): after a failover it must still get the same answer (issue 37 item 5).
  const weights: Record<OpKind, number> = {
    checkout: 62,
    'repeat-key': 10,
    'pay-or-cancel': 15,
    refund: 8,
    restock: 3,
  }
  return p.weighted(weights)
}
