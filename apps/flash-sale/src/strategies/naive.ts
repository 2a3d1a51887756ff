import { newOrderId } from '../domain/ids.js'
import { saleRefusal, unavailable } from '../domain/refusals.js'
import { saleKeys } from '../redis/keys.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import type { SaleStore } from '../sale/sale-store.js'
import type { StockView } from '../sale/stock-view.js'
import { type CheckoutOutcome, type CheckoutRequest, type CheckoutStrategy, refused } from './strategy.js'

/**
 * The design that oversold: read the stock, then write stock − 1, in two round trips with nothing
 * in between to stop another pod doing the same. Kept only to show the failure; it is never the
 * default and `serve` prints a warning when it is chosen. (Idempotency keys are not honoured.)
 * Its wallet is naive too: the worker persists naive orders with the read-then-write charge
 * (sql/batch-wallets.ts NaiveBatchWallet, in the writer OrderStore.batchWriterFor gives
 * 'naive'), which charges twice for one debit under concurrency where the guarded charge of the
 * other strategies never does.
 */
export class NaiveStrategy implements CheckoutStrategy {
  readonly name = 'naive' as const
  constructor(readonly store: SaleStore) {}

  async checkout(req: CheckoutRequest): Promise<CheckoutOutcome> {
    try {
      return await this.#checkout(req)
    } catch (err) {
      if (isRedisOutage(err)) return refused(unavailable('the sale store (Redis) is unreachable', 1, err))
      throw err
    }
  }

  async #checkout({ productId, userId }: CheckoutRequest): Promise<CheckoutOutcome> {
    const k = saleKeys(productId)
    const redis = this.store.client
    const [round, price, payment, hold] = await redis.hmget(
      k.meta,
      'round',
      'price_cents',
      'payment',
      'hold_seconds',
    )
    if (round === null || round === undefined) return refused(saleRefusal('UNKNOWN_PRODUCT', productId))
    const stock = Number(await redis.get(k.stock))
    const bought = await redis.hget(k.buyers, userId)
    if (bought !== null) return refused(saleRefusal('ALREADY_PURCHASED', productId, bought.split('|')[1]))
    if (stock <= 0) return refused(saleRefusal('SOLD_OUT', productId))
    const orderId = newOrderId(productId)
    await redis.set(k.stock, stock - 1) // the lost update: another request read the same stock
    await redis.hset(k.buyers, userId, `1|${orderId}`)
    const reservedAt = Date.now()
    await redis.hset(k.status, orderId, `reserved|${userId}|${round}|${reservedAt}`)
    await redis.xadd(
      k.orders,
      '*',
      ...['order_id', orderId, 'user_id', userId, 'round', round, 'unit', '1'],
      ...['price_cents', price ?? '0', 'reserved_at', String(reservedAt)],
    )
    const payByMs = payment === 'hold' ? reservedAt + Number(hold ?? 0) * 1_000 : undefined
    return {
      ok: true,
      orderId,
      status: 'reserved',
      remaining: stock - 1,
      replayed: false,
      ...(payByMs !== undefined && { payByMs }),
    }
  }

  remaining(productId: string): Promise<number | undefined> {
    return this.store.remaining(productId)
  }

  stockView(productId: string): Promise<StockView> {
    return this.store.stockView(productId)
  }

  /** Naive reads the stock itself, never the room: its checkouts always pass the gate first. */
  roomGen(): string | undefined {
    return undefined
  }

  async close(): Promise<void> {}
}
