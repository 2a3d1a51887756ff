// What the demo watches while a phase runs: the sale's stock left and queue pending each second
// (the report's charts and the live line), and afterwards the worker's drain into SQL.
import { setTimeout as sleep } from 'node:timers/promises'
import type { Db } from '@kunci/flash-sale'
import type { Sample } from '../report/report-input.js'
import type { LocalStack } from '../stack/local-stack.js'
import { readLedger } from './checker.js'
import type { ProgressState } from './progress-line.js'

const SAMPLE_EVERY_MS = 1_000

interface AdminCounts {
  remaining: number
  pending: number
}

async function adminCounts(stack: LocalStack, productId: number): Promise<AdminCounts | undefined> {
  try {
    const res = await fetch(`${stack.url}/admin/sales/${productId}`, {
      headers: { authorization: `Bearer ${stack.adminToken}` },
      signal: AbortSignal.timeout(2_000),
    })
    if (!res.ok) return undefined
    const body = (await res.json()) as Partial<AdminCounts>
    return typeof body.remaining === 'number' && typeof body.pending === 'number'
      ? { remaining: body.remaining, pending: body.pending }
      : undefined
  } catch {
    return undefined // a fault in progress: skip this sample
  }
}

/** Samples stock left and queue pending each second until stop(); times in epoch ms. */
export function startSampler(stack: LocalStack, productId: number, state: ProgressState) {
  const stock: { at: number; value: number }[] = []
  const pending: { at: number; value: number }[] = []
  let running = true
  const loop = (async () => {
    while (running) {
      const at = Date.now()
      const c = await adminCounts(stack, productId)
      if (c) {
        stock.push({ at, value: c.remaining })
        pending.push({ at, value: c.pending })
        state.stockLeft = c.remaining
        state.pending = c.pending
      }
      const wait = SAMPLE_EVERY_MS - (Date.now() - at)
      if (running && wait > 0) await sleep(wait)
    }
  })()
  const onAxis = (samples: { at: number; value: number }[], originMs: number): Sample[] =>
    samples.map((x) => ({ t: Math.round((x.at - originMs) / 100) / 10, value: x.value }))
  return {
    async stop(originMs: number) {
      running = false
      await loop
      return { stock: onAxis(stock, originMs), pending: onAxis(pending, originMs) }
    },
  }
}

/** Until every 200 is settled in SQL and nothing is pending, or the deadline. */
export async function waitForDrain(
  db: Db,
  stack: LocalStack,
  productId: number,
  answered200: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline && !signal?.aborted) {
    const ledger = await readLedger(db, String(productId)).catch(() => undefined)
    const counts = await adminCounts(stack, productId)
    if (ledger && counts && ledger.confirmed.size + ledger.failed >= answered200 && counts.pending === 0)
      return true
    await sleep(250)
  }
  return false
}
