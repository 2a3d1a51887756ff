import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { productOfOrder } from '../domain/ids.js'
import { ApiError } from './api-error.js'

/** GET /v1/orders/:order_id → reserved (Redis) → confirmed (persisted in SQL) or failed. */
export async function orderRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { order_id: string } }>('/v1/orders/:order_id', async (request) => {
    const orderId = request.params.order_id
    const productId = productOfOrder(orderId)
    if (productId === undefined) throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
    const cached = await deps.store.orderStatus(productId, orderId).catch(() => undefined)
    // Reserved (not persisted yet, or held until pay_by) and failed (failure_reason) come from SQL.
    if (cached && cached.status !== 'reserved' && cached.status !== 'failed') {
      return { order_id: orderId, status: cached.status, product_id: productId, user_id: cached.userId }
    }
    let row: Awaited<ReturnType<typeof deps.orders.order>>
    try {
      row = await deps.orders.order(orderId)
    } catch (err) {
      // SQL down: Redis still knows a reserved order; only an unknown one needs SQL.
      if (!cached) throw err
    }
    if (row) {
      return {
        order_id: orderId,
        status: row.status,
        product_id: productId,
        user_id: row.user_id,
        ...(row.failure_reason ? { failure_reason: row.failure_reason } : {}),
        ...(row.pay_by ? { pay_by: row.pay_by.toISOString() } : {}),
      }
    }
    if (cached)
      return { order_id: orderId, status: cached.status, product_id: productId, user_id: cached.userId }
    throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
  })
}
