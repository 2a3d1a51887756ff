import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import { putWallet } from '../money.js'
import type { FaultRunner } from './faults.js'
import { type GeneratorOptions, nextOp, Prng, type SalePlan, type SeedPlan } from './generator.js'
import {
  type ActionCall,
  type Call,
  type CheckoutCall,
  type FaultRecord,
  finalOf,
  type History,
  type PutSaleCall,
  type RestockCall,
  type SaleRound,
  send,
  untilAnswered,
} from './history.js'

// One seed's run: the sales opened one after the other, the clients' random operations through
// the service's HTTP API (every 429/503/no answer retried after 100–300 ms, with the same key),
// and the faults one after the other, each undone before the next; when the load time is over,
// the clients finish their calls, the last fault is undone, and the history goes to the checker.

export const PRICE = 1

export interface RunSeedOptions extends GeneratorOptions {
  /** Product ids of this seed: productBase, productBase + 1, … */
  productBase: number
  /** Told of each fault as it ends (the test's log). */
  onFault?: (f: FaultRecord) => void
}

interface Held {
  orderId: string
  productId: string
  userId: number
  payment: 'instant' | 'hold'
}

interface OpenSale {
  productId: string
  plan: SalePlan
}

export async function runSeed(plan: SeedPlan, runner: FaultRunner, o: RunSeedOptions): Promise<History> {
  const { stack } = runner
  const auth = { authorization: `Bearer ${stack.adminToken}` }
  const history: History = { seed: plan.seed, calls: [], rounds: [], faults: [] }
  const pool = new Pool(stack.url, { connections: o.clients + 4, pipelining: 1 })
  // Every fourth client goes through the solo instance when the stack has one (partitions c and d
  // cut it off by uid). Chosen by the client's number, so no seed's draws change with it.
  const soloPool = stack.soloUrl
    ? new Pool(stack.soloUrl, { connections: o.clients, pipelining: 1 })
    : undefined
  const via = (client: number) => (soloPool && client % 4 === 3 ? soloPool : pool)
  const stop = new AbortController()
  const held: Held[] = []
  const open: OpenSale[] = []
  const rootPrng = new Prng(plan.seed)
  const retryDelay = (p: Prng) => () => p.int(100, 300)

  for (const u of plan.brokeUsers) await putWallet(stack, u, 0)
  for (const u of plan.poorUsers) await putWallet(stack, u, PRICE)

  /** PUT /admin/sales/:id until 200 (a reset, if the product has a round already). */
  const putSale = async (productId: string, s: SalePlan, p: Prng) => {
    const call: PutSaleCall = { kind: 'put-sale', productId, attempts: [] }
    history.calls.push(call)
    const startedAt = Date.now()
    const body = {
      stock: s.stock,
      price: PRICE,
      per_user_limit: s.perUserLimit,
      payment: s.payment,
      ...(s.holdSeconds !== undefined && { hold_seconds: s.holdSeconds }),
    }
    let json: Record<string, unknown> = {}
    await untilAnswered(
      call,
      async () => {
        const a = await send(pool, { method: 'PUT', path: `/admin/sales/${productId}`, body, headers: auth })
        json = a.json
        return a
      },
      retryDelay(p),
      60_000,
    )
    const final = finalOf(call)
    if (final?.status !== 200)
      throw new Error(`PUT /admin/sales/${productId}: ${JSON.stringify(call.attempts.at(-1))}`)
    const round: SaleRound = {
      productId,
      round: Number(json.round),
      stock: s.stock,
      perUserLimit: s.perUserLimit,
      payment: s.payment,
      startedAt,
      endedAt: Date.now(),
    }
    history.rounds.push(round)
  }

  const salesPrng = rootPrng.fork('put-sales')
  const openNext = async (i: number) => {
    const s = plan.sales[i]!
    const productId = s.reset && open.length > 0 ? open.at(-1)!.productId : String(o.productBase + i)
    await putSale(productId, s, salesPrng)
    if (s.reset) {
      // The reset product's round is the new sale: the older entry gives way to it.
      const at = open.findIndex((x) => x.productId === productId)
      if (at >= 0) open.splice(at, 1)
    }
    open.push({ productId, plan: s })
  }
  await openNext(0)

  const keyed: { sale: OpenSale; userId: number; key: string }[] = []
  const checkout = async (p: Prng, through: Pool, again?: (typeof keyed)[number]) => {
    const sale = again?.sale ?? (p.chance(0.8) || open.length === 1 ? open.at(-1)! : p.pick(open))
    const userId = again?.userId ?? p.pick(sale.plan.users)
    const key = again?.key ?? (p.chance(0.7) ? p.uuid() : undefined)
    if (key && !again) keyed.push({ sale, userId, key })
    const click = async (repeat: boolean) => {
      const call: CheckoutCall = {
        kind: 'checkout',
        productId: sale.productId,
        userId,
        key,
        repeat,
        attempts: [],
      }
      history.calls.push(call)
      const a = await untilAnswered(
        call,
        () =>
          send(through, {
            method: 'POST',
            path: '/v1/checkout',
            body: { product_id: Number(sale.productId), user_id: userId },
            headers: key ? { 'idempotency-key': key } : {},
          }),
        retryDelay(p),
      )
      if ((a.status === 200 || a.status === 202) && a.orderId && !held.some((h) => h.orderId === a.orderId))
        held.push({ orderId: a.orderId, productId: sale.productId, userId, payment: sale.plan.payment })
    }
    // A later repeat of a key; or a fast one: the impatient double click, 0–300 ms after the first.
    if (again) await click(true)
    else if (key && p.chance(0.25)) {
      const gap = p.int(0, 300)
      await Promise.all([click(false), sleep(gap).then(() => click(true))])
    } else await click(false)
  }

  const action = async (p: Prng, through: Pool, kind: 'pay-or-cancel' | 'refund') => {
    const mine = kind === 'refund' ? held : held.filter((h) => h.payment === 'hold')
    if (mine.length === 0) return checkout(p, through)
    const h = p.pick(mine)
    const verb = kind === 'refund' ? 'refund' : p.chance(0.65) ? 'pay' : 'cancel'
    const call: ActionCall = {
      kind: verb,
      productId: h.productId,
      orderId: h.orderId,
      userId: h.userId,
      attempts: [],
    }
    history.calls.push(call)
    await untilAnswered(
      call,
      () =>
        verb === 'refund'
          ? send(through, { method: 'POST', path: `/admin/orders/${h.orderId}/refund`, headers: auth })
          : send(through, {
              method: 'POST',
              path: `/v1/orders/${h.orderId}/${verb}`,
              body: { user_id: h.userId },
            }),
      retryDelay(p),
    )
  }

  const restock = async (p: Prng, through: Pool) => {
    const sale = open.at(-1)!
    const units = p.int(1, 3)
    const call: RestockCall = { kind: 'restock', productId: sale.productId, units, attempts: [] }
    history.calls.push(call)
    await untilAnswered(
      call,
      () =>
        send(through, {
          method: 'POST',
          path: `/admin/sales/${sale.productId}/restock`,
          body: { units },
          headers: auth,
        }),
      retryDelay(p),
    )
  }

  const client = async (i: number) => {
    const p = rootPrng.fork(`client-${i}`)
    const through = via(i)
    while (!stop.signal.aborted) {
      const op = nextOp(p)
      if (op === 'checkout') await checkout(p, through)
      else if (op === 'repeat-key') {
        // Keys of the sales' current rounds (a reset starts the keys' answers afresh).
        const mine = keyed.filter((k) => open.includes(k.sale))
        await checkout(p, through, mine.length > 0 ? p.pick(mine) : undefined)
      } else if (op === 'restock') await restock(p, through)
      else await action(p, through, op)
      await sleep(p.int(20, 200))
    }
  }

  const opener = async () => {
    for (let i = 1; i < plan.sales.length; i++) {
      await sleep(plan.saleEveryMs, undefined, { signal: stop.signal }).catch(() => {})
      if (stop.signal.aborted) return
      await openNext(i)
    }
  }

  const faults = async () => {
    const fp = rootPrng.fork('fault-targets')
    for (const f of plan.faults) {
      await sleep(f.pauseMs, undefined, { signal: stop.signal }).catch(() => {})
      if (stop.signal.aborted) return
      const target = open.at(-1)!.productId
      const r = await runner.run(f, target, fp.int(0, 1))
      history.faults.push(r)
      o.onFault?.(r)
    }
  }

  const clients = Array.from({ length: o.clients }, (_, i) => client(i))
  const others = [opener(), faults()]
  await sleep(o.loadMs)
  stop.abort()
  // The faults first: the clients' last calls may wait for a master or a worker to be back.
  const settled = await Promise.allSettled([...others, ...clients])
  await pool.close()
  await soloPool?.close()
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected')
  if (failed)
    throw new Error(`seed ${plan.seed}: the run broke: ${String(failed.reason)}`, { cause: failed.reason })
  return history
}

/** Every call's attempts in one list, with their call: for the checker and failure messages. */
export function attemptsOf(calls: readonly Call[]) {
  return calls.flatMap((call) => call.attempts.map((a) => ({ call, a })))
}
