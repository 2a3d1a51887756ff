import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { productOfOrder } from '../domain/ids.js'
import { orderDetails } from '../sql/held-orders.js'
import { ApiError } from './api-error.js'

/**
 * GET /v1/orders/:order_id → reserved (Redis) → confirmed (persisted in SQL) or failed; for hold
 * sales reserved (in SQL, with pay_by) → paid | cancelled | expired (domain/order-states.ts).
 */
export async function orderRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { order_id: string } }>('/v1/orders/:order_id', async (request) => {
    const orderId = request.params.order_id
    const productId = productOfOrder(orderId)
    if (productId === undefined) throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
    const cached = await deps.store.orderStatus(productId, orderId).catch(() => undefined)
    // A final status in Redis is the answer (the worker, a payment, a return wrote it there after
    // SQL); reserved (not persisted yet, or held until pay_by) and failed (failure_reason) come from SQL.
    if (cached && cached.status !== 'reserved' && cached.status !== 'failed') {
      return { order_id: orderId, status: cached.status, product_id: productId, user_id: cached.userId }
    }
    let row: Awaited<ReturnType<typeof orderDetails>>
    try {
      row = await orderDetails(deps.db, orderId)
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
        ...(row.ended_at ? { ended_at: row.ended_at.toISOString() } : {}),
        ...(row.failure_reason ? { failure_reason: row.failure_reason } : {}),
        ...(row.pay_by ? { pay_by: row.pay_by.toISOString() } : {}),
      }
    }
    if (cached) {
      const payBy = await deps.store.payBy(productId, orderId).catch(() => undefined)
      return {
        order_id: orderId,
        status: cached.status,
        product_id: productId,
        user_id: cached.userId,
        ...(payBy !== undefined ? { pay_by: new Date(payBy).toISOString() } : {}),
      }
    }
    throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
  })
}
