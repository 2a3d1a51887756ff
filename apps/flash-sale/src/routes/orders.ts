import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { mayStillAppear, ORDER_LOST_AFTER_MS, orderIdTime, productOfOrder } from '../domain/ids.js'
import { orderDetails } from '../sql/held-orders.js'
import { ApiError } from './api-error.js'

/**
 * An order neither Redis nor SQL holds, older than ORDER_LOST_AFTER_MS, was answered 202 and then
 * lost: a failover promoted a replica that never received the reservation (only a 202 can be lost
 * so: a 200 was on a replica). Its poll ends in `failed` with failure_reason `not_kept` ("nothing
 * was charged, buy again") instead of UNKNOWN_ORDER for ever (issue 37). Before it, 409
 * ORDER_PENDING (poll again): the worker may be holding its event back, or a reset dropped its
 * status in Redis while its event waits for SQL.
 */
export { ORDER_LOST_AFTER_MS }

/** Final statuses in Redis that nothing changes afterwards; others are asked of SQL (a refund can follow confirmed or paid). */
const FINAL_IN_REDIS = new Set(['refunded', 'cancelled', 'expired'])

/**
 * GET /v1/orders/:order_id → reserved (Redis) → confirmed (persisted in SQL) or failed; for hold
 * sales reserved (in SQL, with pay_by) → paid | cancelled | expired (domain/order-states.ts).
 * SQL's word wins over Redis's: Redis's status of a confirmed or paid order can be stale (a
 * refund committed between the worker's commit and its settle, issue 37 item 8).
 */
export async function orderRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { order_id: string } }>('/v1/orders/:order_id', async (request) => {
    const orderId = request.params.order_id
    const productId = productOfOrder(orderId)
    if (productId === undefined) throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
    let redisFailure: { err: unknown } | undefined
    const cached = await deps.store.orderStatus(productId, orderId).catch((err: unknown) => {
      redisFailure = { err }
      return undefined
    })
    if (cached && FINAL_IN_REDIS.has(cached.status)) {
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
    // Redis could not be asked: whether it holds the order is unknown (503, poll again).
    if (redisFailure) throw redisFailure.err
    if (mayStillAppear(orderId))
      throw new ApiError('ORDER_PENDING', `order ${orderId} is not recorded yet: poll again`, {}, 1)
    if (orderIdTime(orderId) !== undefined && (await deps.orders.saleCounts(productId)))
      return {
        order_id: orderId,
        status: 'failed',
        product_id: productId,
        failure_reason: 'not_kept',
        message: 'the reservation was lost in a failover before it was kept; nothing was charged: buy again',
      }
    throw new ApiError('UNKNOWN_ORDER', `no order ${orderId}`)
  })
}
