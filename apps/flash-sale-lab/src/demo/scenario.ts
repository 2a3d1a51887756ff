// The demo's script: per strategy three phases (the articles' story, 100 units of product 9921;
// a larger sale for sustained throughput; then the retry storm of a sold-out sale), the first two
// under a k6-style ramp of many distinct users with repeats and double clicks, with the same four
// faults at fixed moments.
//
// Decisions the issue leaves open:
// - The master killed is the one holding the sale's slot ({sale:<id>}), found when the fault
//   fires: killing another master would show nothing about the sale.
// - The lock-node faults hit nodes 2 (kill -9, back after a few seconds, with its AOF) and 0
//   (SIGSTOP for a second) of the 5 Redlock nodes: only `redlock` uses them, which is the point
//   (the other strategies do not care).
// - The third phase is the retry storm of issue 13: one fault (the sale's master, left dead
//   while the crowd retries), since that crowd is what kept the checkout down.
// - `full` runs the articles' whole ramp (30s→100, 1m→500, 30s→0) once per strategy, on the
//   story phase; the throughput phase keeps the default length.
// - The waiting-room comparison (issue 17) is two more phases: the same crowd (the same user ids
//   arriving at the same moments, the same stock) straight to the checkout, then through the
//   sale's waiting room. The sale opens shortly after the first users arrive, as a drop does, so
//   part of the crowd waits for the opening: without a room it clicks again every 100–300 ms,
//   with one it polls as the page does. No fault: the figures compare the crowds, not a failover.
//   Not with redlock, whose sales cannot have a room (the PUT is refused: the report says so).
// - Money (issue 16) is two more phases, one sale each, a crowd of users whose wallets the phase
//   sets first (ids of their own, so no other phase's charges are in their books): `money-instant`,
//   paid when the worker persists the order, where every third user is funded for less than the
//   price (their orders fail INSUFFICIENT_FUNDS and the units go back to the sale, to be bought by
//   later arrivals) and the others for exactly one unit; `money-hold`, paid later, where the
//   reserved buyers pay, cancel or never pay (a short hold_seconds, so expiry happens during the
//   phase) and every fifth payer is short (402: the order expires). One fault each: kill -9 of the
//   worker (restarted), while it charges and returns units in the first, while it expires orders
//   in the second, so redelivered events and the sweeper's restart are part of the books checked.
//   Not earlier in the held sale: orders reserved while the worker is down reach SQL only after
//   its restart and claim, and their hold runs from the reservation (pay_by is Redis's time), so
//   an outage as long as hold_seconds expires them before anyone can pay (ORDER_PENDING, then
//   ORDER_NOT_PAYABLE): documented, but not what this phase is about.
import { saleKeys } from '@kunci/flash-sale'
import {
  type ChaosStep,
  type FaultHandler,
  killClusterMaster,
  killNode,
  type NodeSet,
  pauseNode,
  type RedisCluster,
} from '@kunci/topology'
import { keySlot } from 'kunci'
import type { LoadMode } from '../load/load-options.js'
import type { Stage } from '../load/stages.js'
import type { StackProcess } from '../stack/child.js'
import type { SaleSpec } from '../stack/local-stack.js'

export interface PhasePlan {
  /** Stable id for the report, e.g. 'sale-100'. */
  id: string
  label: string
  productId: number
  stock: number
  stages: Stage[]
  schedule: ChaosStep[]
  /** Share of users who retry after 429/503 and of purchases sent twice at once. */
  repeatRatio: number
  doubleClickRatio: number
  /**
   * The retry storm: every refused user retries until answered, 100–300 ms apart (instead of
   * `repeatRatio` of them up to 3 times after the think time).
   */
  retryStorm?: boolean
  /** User ids are drawn from 1..users: fewer users than purchases means repeats. */
  users: number
  /**
   * A crowd phase: one user per VU (ids 1..users in arrival order, arriving along the stages),
   * each until a final answer, straight to the checkout or through the sale's waiting room.
   */
  crowd?: {
    mode: Exclude<LoadMode, 'purchases'>
    /** The sale opens this long after the phase starts (its first arrivals). */
    opensAfterMs: number
    /** The room's settings (PUT /admin/sales/:id `waiting_room`), with mode 'waiting-room'. */
    waitingRoom?: SaleSpec['waitingRoom']
    /** A user without a final answer by then gives up. */
    patienceMs: number
  }
  /** A money phase (issue 16): its users (ids userIdMin..userIdMin + users − 1) arrive as a crowd. */
  money?: MoneyPlan
}

export interface MoneyPlan {
  payment: 'instant' | 'hold'
  /** With 'hold': PUT /admin/sales/:id `hold_seconds`. */
  holdSeconds?: number
  price: number
  /** The first user id; the crowd is users userIdMin.., in arrival order. */
  userIdMin: number
  /** Every `shortEvery`-th user (1-based) gets `shortBalance`, the others `fundedBalance`. */
  shortEvery: number
  fundedBalance: number
  shortBalance: number
  /** 'hold': shares of the reserved buyers who pay and who cancel (the rest never pay). */
  payRatio?: number
  cancelRatio?: number
}

const s = (seconds: number) => Math.round(seconds * 1000)

/** The four faults, `t0` seconds into the phase and `gap` seconds apart. */
function faults(t0: number, gap: number, lockDownMs: number, workerDownMs: number): ChaosStep[] {
  return [
    { at: s(t0), fault: 'kill-master', label: 'kill -9 sale master (failover)' },
    {
      at: s(t0 + gap),
      fault: 'kill-lock-node',
      target: '2',
      durationMs: lockDownMs,
      label: 'kill -9 lock node 2',
    },
    { at: s(t0 + 2 * gap), fault: 'kill-worker', durationMs: workerDownMs, label: 'kill -9 worker' },
    {
      at: s(t0 + 3 * gap),
      fault: 'sigstop',
      target: '0',
      durationMs: 1_000,
      label: 'SIGSTOP lock node 0 (1 s)',
    },
  ]
}

const ramp = (...parts: [number, number][]): Stage[] =>
  parts.map(([seconds, target]) => ({ durationMs: s(seconds), target }))

const STORY = { id: 'sale-100', productId: 9921, stock: 100, repeatRatio: 0.5, doubleClickRatio: 0.05 }
const BULK = { productId: 9922, repeatRatio: 0.5, doubleClickRatio: 0.05 }

/**
 * Issue 13's crowd: a sold-out sale whose every refused user clicks again within 100–300 ms with
 * the same Idempotency-Key, and the sale's master killed 0.5 s after the sale opens and left dead
 * (as a lost pod is until it is rescheduled) for `deadS`. The checkout must come back while the
 * crowd is still there.
 */
function retryStorm(seconds: number, vus: number, deadS: number): PhasePlan {
  return {
    id: 'storm-100',
    label: `100 units, retry storm: ${vus} clients retrying every 100–300 ms, sale master killed`,
    productId: 9923,
    stock: 100,
    repeatRatio: 1,
    doubleClickRatio: 0.05,
    retryStorm: true,
    users: 4_000,
    stages: ramp([0.2, vus], [seconds - 0.2, vus]),
    schedule: [
      {
        at: s(0.5),
        fault: 'kill-master',
        durationMs: s(deadS),
        label: `kill -9 sale master, left dead ${deadS} s`,
      },
    ],
  }
}

/**
 * The comparison: `users` users arriving over `arriveS`, the sale opening after `opensS`, `stock`
 * units; the room lets `stock` people in per second, at most `stock` at once (k = 2, the default).
 */
function crowdPair(stock: number, users: number, arriveS: number, opensS: number): PhasePlan[] {
  const common = {
    productId: 9924,
    stock,
    users,
    repeatRatio: 1,
    doubleClickRatio: 0.05,
    stages: ramp([arriveS, users]),
    schedule: [] as ChaosStep[],
  }
  const crowd = { opensAfterMs: s(opensS), patienceMs: 30_000 }
  const who = `${stock} units, ${users} users arriving over ${arriveS} s, the sale opening at ${opensS} s`
  return [
    {
      ...common,
      id: 'crowd-direct',
      label: `${who}: no room, every refusal clicked again in 100–300 ms`,
      crowd: { ...crowd, mode: 'crowd' },
    },
    {
      ...common,
      id: 'crowd-room',
      productId: 9925,
      label: `${who}: through the waiting room (${stock} admitted/s)`,
      crowd: {
        ...crowd,
        mode: 'waiting-room',
        waitingRoom: { admit_per_second: stock, max_admitted: stock, admission_seconds: 30 },
      },
    },
  ]
}

const PRICE = 49.99

/**
 * The money phases: `stock` units, `users` arriving over `arriveS`; the worker killed for
 * `downS`, at `chargeKillS` in the instant sale (while it charges) and at `sweepKillS` in the held
 * one (while it expires orders, after most were paid or not). See the decisions above.
 */
function moneyPair(
  stock: number,
  users: number,
  arriveS: number,
  holdSeconds: number,
  kills: { chargeKillS: number; sweepKillS: number; downS: number },
): PhasePlan[] {
  const killWorker = (at: number, label: string): ChaosStep[] => [
    { at: s(at), fault: 'kill-worker', durationMs: s(kills.downS), label },
  ]
  const common = {
    stock,
    users,
    repeatRatio: 1,
    doubleClickRatio: 0.05,
    stages: ramp([arriveS, users]),
  }
  return [
    {
      ...common,
      id: 'money-instant',
      productId: 9926,
      label: `${stock} units paid at once, ${users} users: 1 in 3 funded below the price, the others for one unit`,
      schedule: killWorker(kills.chargeKillS, 'kill -9 worker (charging)'),
      money: {
        payment: 'instant',
        price: PRICE,
        userIdMin: 500_001,
        shortEvery: 3,
        fundedBalance: PRICE,
        shortBalance: 49.98,
      },
    },
    {
      ...common,
      id: 'money-hold',
      productId: 9927,
      label: `${stock} units held ${holdSeconds} s until paid, ${users} users: 60 % pay, 20 % cancel, 20 % never pay`,
      schedule: killWorker(kills.sweepKillS, 'kill -9 worker (sweeping)'),
      money: {
        payment: 'hold',
        holdSeconds,
        price: PRICE,
        userIdMin: 600_001,
        shortEvery: 5,
        fundedBalance: PRICE,
        shortBalance: 10,
        payRatio: 0.6,
        cancelRatio: 0.2,
      },
    },
  ]
}

/**
 * The demo's lengths: phase lengths and fault times per profile (phasePlans below). Declared
 * here, where the profiles are defined, not in demo-options.ts: that file reads phasePlans() to
 * check the options, so this one importing it back made the two import each other.
 */
export type DemoProfile = 'quick' | 'default' | 'full'

/** The phases of one strategy for a profile. */
export function phasePlans(profile: DemoProfile): PhasePlan[] {
  switch (profile) {
    case 'quick':
      return [
        {
          ...STORY,
          label: '100 units, quick',
          stages: ramp([1, 20], [3, 40], [1, 0]),
          schedule: faults(0.5, 0.8, 1_500, 1_500),
          users: 2_000,
        },
        {
          ...BULK,
          id: 'sale-1000',
          label: '1,000 units, quick',
          stock: 1_000,
          stages: ramp([1, 30], [4, 60], [1, 0]),
          schedule: faults(0.8, 1, 1_500, 1_500),
          users: 5_000,
        },
        retryStorm(6, 100, 4),
        ...crowdPair(50, 200, 2, 1),
        ...moneyPair(30, 90, 7, 3, { chargeKillS: 1, sweepKillS: 3.5, downS: 1 }),
      ]
    case 'default':
    case 'full': {
      const story: PhasePlan =
        profile === 'full'
          ? {
              ...STORY,
              label: "100 units, the articles' 2-minute ramp",
              stages: ramp([30, 100], [60, 500], [30, 0]),
              schedule: faults(20, 25, 5_000, 5_000),
              users: 99_999,
            }
          : {
              ...STORY,
              label: '100 units, 12 s',
              stages: ramp([2, 60], [8, 200], [2, 0]),
              schedule: faults(1, 2.5, 2_500, 2_500),
              users: 20_000,
            }
      return [
        story,
        {
          ...BULK,
          id: 'sale-5000',
          label: '5,000 units, 16 s',
          stock: 5_000,
          stages: ramp([2, 100], [12, 300], [2, 0]),
          schedule: faults(2, 3, 2_500, 2_500),
          users: 20_000,
        },
        retryStorm(12, 200, 9),
        ...crowdPair(100, 600, 4, 2),
        ...moneyPair(100, 300, 12, 5, { chargeKillS: 2, sweepKillS: 6, downS: 2 }),
      ]
    }
  }
}

/**
 * The phases `wanted` names (`--phases`): an id, or the start of ids before a '-' (`money` for
 * money-instant and money-hold); every phase without `wanted`. In the profile's order.
 */
export function selectPhases(plans: PhasePlan[], wanted: readonly string[] | undefined): PhasePlan[] {
  if (wanted === undefined) return plans
  return plans.filter((p) => wanted.some((w) => p.id === w || p.id.startsWith(`${w}-`)))
}

export interface FaultTargets {
  cluster: RedisCluster
  lockNodes: NodeSet | undefined
  worker: StackProcess
}

/** The handlers the schedule names, bound to one stack and one sale. */
export function faultHandlers(stack: FaultTargets, productId: number): Record<string, FaultHandler> {
  const killMaster = killClusterMaster(stack.cluster)
  const lockNodes = stack.lockNodes?.nodes ?? []
  const noLockNodes: FaultHandler = async () => undefined
  return {
    'kill-master': async (step, ctx) => {
      const owner = await stack.cluster.slotOwner(keySlot(saleKeys(String(productId)).stock))
      return killMaster({ ...step, target: owner.name }, ctx)
    },
    'kill-lock-node': lockNodes.length > 0 ? killNode(lockNodes) : noLockNodes,
    sigstop: lockNodes.length > 0 ? pauseNode(lockNodes) : noLockNodes,
    // StackProcess owns its child (killProcess wants a ChildProcess): kill -9, then a new worker.
    'kill-worker': async () => {
      await stack.worker.kill()
      return async () => stack.worker.start()
    },
  }
}

/** Length of a phase's load, for the progress line's "of N s". */
export function phaseSeconds(plan: PhasePlan): number {
  return plan.stages.reduce((a, st) => a + st.durationMs, 0) / 1000
}
