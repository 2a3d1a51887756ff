import { startNetworkFaults } from '@kunci/topology'
import { describe, expect, it } from 'vitest'
import { type Broken, check } from '../support/fault-generator/checker.js'
import { collectFacts, drain, tally } from '../support/fault-generator/facts.js'
import { FaultRunner, SOLO_UID } from '../support/fault-generator/faults.js'
import { type FaultKind, planSeed, seedsOfRun } from '../support/fault-generator/generator.js'
import { runSeed } from '../support/fault-generator/run-seed.js'
import { useStack } from '../support/stack-fixture.js'

// Issue 37's fault generator (STYLE.md §14): seeded random operations through the HTTP API (keyed
// and keyless checkouts, fast repeats of a key, limits 1–3, pay, cancel, expiry, refunds,
// restocks, resets) against seeded random faults (kill -9 of the worker, of a serve instance, of
// the sale's master; SIGSTOP of its replica; CLIENT KILL storms on the app's connections;
// partitions a-e of partition-faults.ts, c and d on a solo instance that every fourth client goes
// through; PostgreSQL refused), then one checker of every promise (checker.ts).
// Seeds replay the same choices for the same code: a change to the weights or the plan changes
// what a seed does, so a fixed seed is re-checked (and its comment updated) after such a change.
//
// Replay a seed: FAULT_SEED=<n> npx vitest run --project crowd apps/flash-sale/test/crowd/fault-generator.test.ts
// (FAULT_LOAD_MS changes the load time, FAULT_SEEDS how many seeds a run without FAULT_SEED takes,
// FAULT_ONLY which fault kinds are drawn.)

/**
 * Seeds that once failed, run first on every CI run (then fresh random seeds up to SEEDS). Each
 * names what broke; a seed stays after its fix. Since partitions c-e and the SQL outage joined
 * the draw, these seeds run other schedules than the ones that found their bugs (seed 5 no longer
 * draws partition-a): what they found is pinned by the integration tests named below, and the
 * seeds stay as two more schedules that every run replays.
 */
const FIXED_SEEDS: readonly number[] = [
  // Fixed (issue 37 item 5, keyed-refusals.test.ts): partition-a on the sale's master; keys
  // answered 409 SOLD_OUT / ALREADY_PURCHASED by the cut-off master (recorded there, never on the
  // replica) got a reservation (200, another order) from the promoted master when repeated
  // seconds later: one key, two final answers (4 keys in one run). Failed once more after the
  // first fix: the refusal lane's keyed path and a keyed ALREADY_PURCHASED backed by SQL skipped
  // the durability check; both wait for it now.
  5,
  // Fixed (order-polls.test.ts): a hold sale reset while its first round's orders were answered
  // 200/202 and not yet in SQL (partition-b); pay/cancel of those orders answered 404
  // UNKNOWN_ORDER, a final answer, and the orders then ended failed (stale_round); now
  // ORDER_PENDING while an order may still appear.
  1161196802,
]

// No seed is open. 1390780968 and 686664980 (and 1161196802 once) failed on the checker, not the
// service: a held order read `reserved` in SQL and `expired` in Redis and GET, because the drain
// waited only for holds lapsed over 3 s ago and the sweeper expired one between the SQL snapshot
// and the Redis reads (facts.ts drain; the failure messages now give pay_by against the snapshot).
// 207209190's finding was the checker's too (an instant sale's pay answered 200 confirmed).

/**
 * Seeds per run: the fixed ones first, then fresh random ones (printed, replayable): each CI run
 * tries one seed nobody has run before. By hand: FAULT_SEEDS=6 adds four random seeds.
 */
const SEEDS = Number(process.env.FAULT_SEEDS ?? FIXED_SEEDS.length + 1)
const LOAD_MS = Number(process.env.FAULT_LOAD_MS ?? 45_000)
const NODE_TIMEOUT_MS = 1_000
const INSTANCES = 2

const ALL_FAULT_WEIGHTS: Partial<Record<FaultKind, number>> = {
  'kill-worker': 3,
  'kill-instance': 3,
  'kill-master': 2,
  'stop-replica': 3,
  'client-kill-storm': 4,
  'partition-a': 1,
  'partition-b': 1,
  'partition-c': 1,
  'partition-d': 1,
  'partition-e': 1,
  'sql-outage': 2,
}
/** FAULT_ONLY=partition-c,sql-outage narrows the draw to those kinds (to work on one; not in CI). */
const FAULT_WEIGHTS = process.env.FAULT_ONLY
  ? Object.fromEntries(
      process.env.FAULT_ONLY.split(',').map((k) => {
        const weight = ALL_FAULT_WEIGHTS[k as FaultKind]
        if (weight === undefined) throw new Error(`FAULT_ONLY: no fault kind ${k}`)
        return [k, weight]
      }),
    )
  : ALL_FAULT_WEIGHTS

describe('fault generator: seeded operations against seeded faults, one checker of every promise', () => {
  const fx = useStack(
    {
      strategy: 'lua',
      instances: INSTANCES,
      lockNodes: false,
      durability: 'replica',
      distinctHosts: true,
      soloInstance: { uid: SOLO_UID },
      clusterNodeTimeoutMs: NODE_TIMEOUT_MS,
      // The worker's sweeper twice a second: holds of 2–5 s expire within the run.
      env: { HOLD_SWEEP_INTERVAL_MS: '500', CLAIM_IDLE_MS: '2000' },
    },
    { db: 'fs_faultgen', sqlProxy: true },
  )
  const seeds = seedsOfRun(process.env.FAULT_SEED, FIXED_SEEDS, SEEDS)
  let earlierFailed = false

  it.each(seeds.map((seed, run) => ({ seed, run })))(
    'seed $seed',
    { timeout: 200_000 },
    async ({ seed, run }) => {
      const started = Date.now()
      console.log(`[fault-generator] seed ${seed} (replay: FAULT_SEED=${seed})`)
      const network = await startNetworkFaults({ name: 'fault-generator' })
      const runner = new FaultRunner(fx.stack, network, NODE_TIMEOUT_MS, fx.sqlProxy)
      try {
        const options = {
          loadMs: LOAD_MS,
          clients: 8,
          firstUser: 1_000_000 + run * 10_000,
          users: 40,
          faults: FAULT_WEIGHTS,
          productBase: 930_000 + run * 100,
          onFault: (f: { kind: string; detail: string; startedAt: number; endedAt: number }) =>
            console.log(
              `[fault-generator] seed ${seed}: ${f.kind} ${f.detail} (${f.endedAt - f.startedAt} ms)`,
            ),
        }
        const plan = planSeed(seed, options)
        const history = await runSeed(plan, runner, options)
        const loadEnded = Date.now()
        await runner.whole(INSTANCES)
        await drain(fx.stack, history)
        const facts = await collectFacts(fx.stack, history)
        const broken: Broken[] = check(plan, history, facts, { reconcileMustExit0: !earlierFailed })
        const byProperty: Record<string, number> = {}
        for (const b of broken) byProperty[b.property] = (byProperty[b.property] ?? 0) + 1
        console.log(
          `[fault-generator] seed ${seed}: ${history.rounds.length} sales/rounds, ${history.faults.length} faults ` +
            `(${history.faults.map((f) => f.kind).join(' ')}), ${facts.orders.size} orders in SQL; answers ${JSON.stringify(tally(history))}; ` +
            `load ${loadEnded - started} ms, whole ${Date.now() - started} ms; broken ${JSON.stringify(byProperty)}`,
        )
        if (broken.length > 0) earlierFailed = true
        expect(
          broken.slice(0, 25).map((b) => `${b.property}: ${b.detail}`),
          `seed ${seed} broke ${broken.length} promises (replay: FAULT_SEED=${seed})`,
        ).toEqual([])
      } catch (err) {
        earlierFailed = true
        if (err instanceof Error) err.message = `seed ${seed} (replay: FAULT_SEED=${seed}): ${err.message}`
        throw err
      } finally {
        runner.close()
        await network.close()
      }
    },
  )
})
