import type { Durability } from '../config.js'
import { unavailable } from '../domain/errors.js'
import { newOrderId } from '../domain/ids.js'
import { isRedisOutage } from '../redis/connect.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import type { SaleStore } from '../sale/sale-store.js'
import { type CheckoutRequest, type CheckoutResult, type CheckoutStrategy, refusal } from './strategy.js'

const REDIS_DEADLINE_MS = 2_000

/**
 * The default: one Lua script on the sale's slot does the whole reservation (reserve.lua), the
 * order goes to SQL through the sale's stream. With durability `replica`, WAIT 1 in the same
 * pipeline: 200 once a replica holds the reservation, 202 pending if it did not confirm in time.
 */
export class LuaStrategy implements CheckoutStrategy {
  readonly name = 'lua' as const
  constructor(
    readonly store: SaleStore,
    readonly options: { durability: Durability; waitTimeoutMs: number },
  ) {}

  async checkout(req: CheckoutRequest): Promise<CheckoutResult> {
    const replicas = this.options.durability === 'replica' ? 1 : 0
    let reply: Awaited<ReturnType<SaleStore['reserve']>>
    try {
      // Bounded: while a slot fails over, ioredis queues commands; a user gets 503 (retry with
      // the same Idempotency-Key, or see ALREADY_PURCHASED) instead of a hanging request.
      reply = await withTimeout(
        this.store.reserve(
          { ...req, orderId: newOrderId(req.productId) },
          replicas,
          this.options.waitTimeoutMs,
        ),
        REDIS_DEADLINE_MS,
      )
    } catch (err) {
      if (err instanceof TimeoutError)
        throw unavailable('the sale store (Redis) did not answer in time', 1, err)
      if (isRedisOutage(err))
        throw unavailable('the sale store (Redis) is unreachable or failing over', 1, err)
      throw err
    }
    if (reply.code !== 'RESERVED') throw refusal(reply.code, req.productId, reply.orderId)
    return {
      orderId: reply.orderId,
      status: replicas === 0 || reply.replicated ? 'reserved' : 'pending',
      remaining: reply.remaining,
      replayed: reply.replayed,
    }
  }

  remaining(productId: string): Promise<number | undefined> {
    return this.store.remaining(productId)
  }

  async close(): Promise<void> {}
}
