// The demo's waiting-room comparison (issue 17): the crowd phases' sale, load options and figures,
// and the pair of them as the report's RoomComparison. See scenario.ts for the plan.
import { crowdFigures } from '../load/crowd-figures.js'
import type { LoadOptions } from '../load/load-options.js'
import type { LoadResult } from '../load/result.js'
import { totalDurationMs } from '../load/stages.js'
import type { CrowdRun, PhaseReport, RoomComparison } from '../report/report-input.js'
import type { LocalStack } from '../stack/local-stack.js'
import type { DemoStrategy } from './demo-options.js'
import type { PhasePlan } from './scenario.js'

/** The phase's sale: PUT /admin/sales/:id, for a crowd phase with its opening and its room. */
export async function putPhaseSale(
  stack: LocalStack,
  plan: PhasePlan,
): Promise<{ opensAtEpochMs: number | undefined; answer: unknown }> {
  const opensAtEpochMs = plan.crowd ? Date.now() + plan.crowd.opensAfterMs : undefined
  const answer = await stack.putSale({
    productId: String(plan.productId),
    stock: plan.stock,
    perUserLimit: 1,
    ...(opensAtEpochMs === undefined ? {} : { startsAt: new Date(opensAtEpochMs) }),
    ...(plan.crowd?.waitingRoom ? { waitingRoom: plan.crowd.waitingRoom } : {}),
  })
  return { opensAtEpochMs, answer }
}

/** runLoad's options for a crowd phase: every refused user clicks again in 100–300 ms. */
export function crowdLoadOptions(plan: PhasePlan): Partial<LoadOptions> {
  if (!plan.crowd) return {}
  return {
    mode: plan.crowd.mode,
    maxRetries: Number.POSITIVE_INFINITY,
    retryDelayMs: [100, 300],
    patienceMs: plan.crowd.patienceMs,
    // Arrivals, then at most one patience for the last users; never reached when all goes well.
    maxDurationMs: totalDurationMs(plan.stages) + plan.crowd.patienceMs + 5_000,
  }
}

export function crowdRun(
  plan: PhasePlan,
  load: LoadResult,
  opensAtEpochMs: number,
  saleAnswer: unknown,
): CrowdRun | undefined {
  if (!plan.crowd) return undefined
  return {
    phase: plan.id,
    mode: plan.crowd.mode,
    ...(plan.crowd.waitingRoom ? { settings: roomSettings(saleAnswer) } : {}),
    figures: crowdFigures(load.users),
    requestsByOp: { ...load.totals.byOp },
    opensAtMs: opensAtEpochMs - load.startedAtMs,
    p99Ms: load.latency.p99Ms,
  }
}

/** The settings the admin answer repeated (its `waiting_room`), numbers only. */
function roomSettings(answer: unknown): Record<string, number> {
  const room = (answer as { waiting_room?: Record<string, unknown> } | undefined)?.waiting_room ?? {}
  return Object.fromEntries(
    Object.entries(room).filter((e): e is [string, number] => typeof e[1] === 'number'),
  )
}

/** The two crowd phases of a strategy as one comparison; undefined without them. */
export function roomComparison(phases: readonly PhaseReport[]): RoomComparison | undefined {
  const direct = phases.find((p) => p.crowd?.mode === 'crowd')
  const room = phases.find((p) => p.crowd?.mode === 'waiting-room')
  if (!direct?.crowd || !room?.crowd) return undefined
  return { stock: room.stock, users: room.crowd.figures.users, direct: direct.crowd, room: room.crowd }
}

/**
 * redlock: its sales cannot have a waiting room (its stock is in SQL, the room reads Redis), so
 * the comparison is skipped. The refusal is asked for, not assumed: the PUT's answer is the reason.
 */
export async function roomRefusal(
  stack: LocalStack,
  strategy: DemoStrategy,
  plan: PhasePlan,
): Promise<string> {
  const res = await fetch(`${stack.url}/admin/sales/${plan.productId}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ stock: plan.stock, price: 49.99, waiting_room: plan.crowd?.waitingRoom }),
    signal: AbortSignal.timeout(5_000),
  })
  const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }
  if (res.ok)
    return `${strategy}: the service accepted a waiting room, which it should refuse; comparison not run`
  return `not run: with STRATEGY=${strategy} the service refuses a sale with a waiting room by design (PUT /admin/sales/${plan.productId} answered ${res.status} ${body.error?.code ?? ''}: ${body.error?.message ?? ''})`
}
