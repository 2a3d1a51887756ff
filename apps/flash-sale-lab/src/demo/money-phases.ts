// The money phases (issue 16): the sale (paid at once or held), the users' wallets, runLoad's
// options for their crowd, the wait until the worker and the expiry sweeper are done, and the
// books checked. See scenario.ts (moneyPair) for the plan and money-checker.ts for the checks.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Db } from '@kunci/flash-sale'
import type { LoadOptions } from '../load/load-options.js'
import type { LoadResult } from '../load/result.js'
import { totalDurationMs } from '../load/stages.js'
import type { LocalStack } from '../stack/local-stack.js'
import { checkMoneyPhase, type MoneyCheck, readMoneyLedger } from './money-checker.js'
import type { MoneyPlan, PhasePlan } from './scenario.js'

type Stack = Pick<LocalStack, 'url' | 'adminToken'>

async function admin(stack: Stack, method: 'GET' | 'PUT', path: string, body?: unknown) {
  const res = await fetch(`${stack.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${stack.adminToken}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(5_000),
  })
  const json = (await res.json().catch(() => ({}))) as Record<string, unknown>
  return { status: res.status, ok: res.ok, body: json }
}

const errorOf = (body: Record<string, unknown>) => {
  const e = body.error as { code?: string; message?: string } | undefined
  return `${e?.code ?? ''}: ${e?.message ?? JSON.stringify(body)}`
}

/**
 * PUT /admin/sales/:id with the plan's payment; a refusal (a strategy without held orders) is
 * returned as the reason the phase did not run, as the service gave it.
 */
export async function putMoneySale(stack: Stack, plan: PhasePlan): Promise<{ refused?: string }> {
  const m = plan.money!
  const res = await admin(stack, 'PUT', `/admin/sales/${plan.productId}`, {
    stock: plan.stock,
    price: m.price,
    per_user_limit: 1,
    payment: m.payment,
    ...(m.holdSeconds === undefined ? {} : { hold_seconds: m.holdSeconds }),
  })
  if (res.ok) return {}
  if (res.status === 400)
    return {
      refused: `not run: PUT /admin/sales/${plan.productId} with payment '${m.payment}' answered 400 ${errorOf(res.body)}`,
    }
  throw new Error(`PUT /admin/sales/${plan.productId}: ${res.status} ${errorOf(res.body)}`)
}

/** The balance the plan gives the i-th user (0-based, in arrival order). */
export function balanceOf(m: MoneyPlan, index: number): number {
  return (index + 1) % m.shortEvery === 0 ? m.shortBalance : m.fundedBalance
}

export const moneyUserIds = (plan: PhasePlan): string[] =>
  Array.from({ length: plan.users }, (_, i) => String(plan.money!.userIdMin + i))

/** PUT /admin/wallets/:user_id for every user of the phase, 16 at a time; Σ set, in cents. */
export async function fundWallets(stack: Stack, plan: PhasePlan): Promise<number> {
  const m = plan.money!
  const ids = moneyUserIds(plan)
  let setCents = 0
  for (let i = 0; i < ids.length; i += 16) {
    await Promise.all(
      ids.slice(i, i + 16).map(async (id, j) => {
        const balance = balanceOf(m, i + j)
        const res = await admin(stack, 'PUT', `/admin/wallets/${id}`, { balance })
        if (!res.ok) throw new Error(`PUT /admin/wallets/${id}: ${res.status} ${errorOf(res.body)}`)
        setCents += Math.round(balance * 100)
      }),
    )
  }
  return setCents
}

/** runLoad's options: the users in arrival order, each until a final answer, then pay/cancel/leave. */
export function moneyLoadOptions(plan: PhasePlan): Partial<LoadOptions> {
  const m = plan.money!
  const patienceMs = 30_000
  return {
    mode: 'crowd',
    userIdMin: m.userIdMin,
    userIdMax: m.userIdMin + plan.users - 1,
    maxRetries: Number.POSITIVE_INFINITY,
    retryDelayMs: [100, 300],
    patienceMs,
    maxDurationMs: totalDurationMs(plan.stages) + patienceMs + 5_000,
    ...(m.payment === 'hold'
      ? {
          afterReserved: {
            payRatio: m.payRatio ?? 0,
            cancelRatio: m.cancelRatio ?? 0,
            // Some pay at once (and may meet ORDER_PENDING), some take a while; all within the hold.
            delayMs: [0, Math.round((m.holdSeconds ?? 1) * 400)] as [number, number],
          },
        }
      : {}),
  }
}

/** The sale's stock in Redis (GET /admin/sales/:id `remaining`); undefined during a fault. */
export async function remainingOf(stack: Stack, productId: number): Promise<number | undefined> {
  try {
    const res = await admin(stack, 'GET', `/admin/sales/${productId}`)
    return res.ok && typeof res.body.remaining === 'number' ? res.body.remaining : undefined
  } catch {
    return undefined
  }
}

/** Once SQL has settled, how long the books may take to balance (a return on its way to Redis). */
const BALANCE_GRACE_MS = 5_000

/**
 * Checks the books once the phase is settled: every order answered 200 is in SQL, no return is
 * pending, no held order is left (each paid, cancelled or expired); then, within a few seconds,
 * stock = sold + remaining + pending and reserved = sold + returned + pending (a strategy that
 * breaks them, naive, does not hold the run up for the whole drain time). Until then, or the
 * deadline: the check of the last snapshot, with `drained` false.
 */
export async function settleAndCheck(
  db: Db,
  stack: Stack,
  plan: PhasePlan,
  load: LoadResult,
  setCents: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<{ check: MoneyCheck; drained: boolean }> {
  const m = plan.money!
  const ids = moneyUserIds(plan)
  let deadline = Date.now() + timeoutMs
  let settledAt: number | undefined
  for (;;) {
    const ledger = await readMoneyLedger(db, String(plan.productId), ids).catch(() => undefined)
    const remaining = await remainingOf(stack, plan.productId)
    if (ledger) {
      const check = checkMoneyPhase(load, ledger, {
        remaining: remaining ?? null,
        setCents,
        users: ids.length,
        price: m.price,
        ...(m.holdSeconds === undefined ? {} : { holdSeconds: m.holdSeconds }),
      })
      const f = check.money
      const settled = check.lost === 0 && f.pendingReturns === 0 && f.held === 0
      if (settled && settledAt === undefined) {
        settledAt = Date.now()
        deadline = Math.min(deadline, settledAt + BALANCE_GRACE_MS)
      }
      const balanced = settled && f.stockBalanced && f.returnsBalanced
      if (balanced || Date.now() >= deadline || signal?.aborted) return { check, drained: settled }
    } else if (Date.now() >= deadline || signal?.aborted) {
      throw new Error(`product ${plan.productId}: SQL could not be read to check the books`)
    }
    await sleep(250)
  }
}
