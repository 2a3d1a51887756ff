import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { ApiError } from '../domain/errors.js'
import { productOfOrder } from '../domain/ids.js'

/** GET /v1/orders/:order_id → reserved (Redis) → confirmed (persisted in SQL) or failed. */
export async function orderRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { order_id: string } }>('/v1/orders/:order_id', async (request) => {
    const orderId = request.params.order_id
    const productId = productOfOrder(orderId)
    if (productId === undefined) throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
    const cached = await deps.store.orderStatus(productId, orderId).catch(() => undefined)
    if (cached && cached.status !== 'reserved') {
      return { order_id: orderId, status: cached.status, product_id: productId, user_id: cached.userId }
    }
    let row: { status: string; user_id: string; failure_reason: string | null } | undefined
    try {
      const r = await deps.db.query<{ status: string; user_id: string; failure_reason: string | null }>(
        'SELECT status, user_id, failure_reason FROM orders WHERE order_id = $1',
        [orderId],
      )
      row = r.rows[0]
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
      }
    }
    if (cached)
      return { order_id: orderId, status: cached.status, product_id: productId, user_id: cached.userId }
    throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
  })
}
