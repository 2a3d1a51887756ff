import type { Durability } from '../config.js'
import { newOrderId } from '../domain/ids.js'
import { saleRefusal, unavailable } from '../domain/refusals.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import { TimeoutError } from '../runtime-timeout.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { CheckoutOutcome, CheckoutRequest, CheckoutStrategy, StockView } from './strategy.js'
import { refused } from './strategy.js'

/**
 * The default: one Lua script on the sale's slot does the whole reservation (reserve.lua), the
 * order goes to SQL through the sale's stream. With durability `replica`, the store confirms a
 * reservation on a replica (redis/replica-acks.ts): 200 once a replica holds it, 202 pending if it
 * did not confirm in time or the master has no replica right now.
 */
export class LuaStrategy implements CheckoutStrategy {
  readonly name = 'lua' as const
  constructor(
    readonly store: SaleStore,
    readonly options: { durability: Durability },
  ) {}

  async checkout(req: CheckoutRequest): Promise<CheckoutOutcome> {
    let reply: Awaited<ReturnType<SaleStore['reserve']>>
    try {
      // Bounded by the store's deadline (2 s): 503, and the user retries with the same
      // Idempotency-Key (or, without one, sees ALREADY_PURCHASED).
      reply = await this.store.reserve({ ...req, orderId: newOrderId(req.productId) })
    } catch (err) {
      if (err instanceof TimeoutError)
        return refused(unavailable('the sale store (Redis) did not answer in time', 1, err))
      if (isRedisOutage(err))
        return refused(unavailable('the sale store (Redis) is unreachable or failing over', 1, err))
      throw err
    }
    if (reply.code !== 'RESERVED') return refused(saleRefusal(reply.code, req.productId, reply.orderId))
    return {
      ok: true,
      orderId: reply.orderId,
      status: this.options.durability === 'none' || reply.replicated ? 'reserved' : 'pending',
      remaining: reply.remaining,
      replayed: reply.replayed,
    }
  }

  remaining(productId: string): Promise<number | undefined> {
    return this.store.remaining(productId)
  }

  stockView(productId: string): Promise<StockView> {
    return this.store.stockView(productId)
  }

  async close(): Promise<void> {}
}
