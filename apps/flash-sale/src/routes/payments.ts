import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import type { OrderActionResult } from '../orders/payments.js'
import { adminGuard } from './admin.js'
import { ApiError } from './api-error.js'
import { ORDER_ACTION, ORDER_REFUND, type OrderActionBody } from './schemas.js'

/**
 * POST /v1/orders/:order_id/pay and /cancel { user_id } (orders of a `hold` sale, issue 16).
 * Repeats answer the same body; the status codes are api-error.ts's (402 INSUFFICIENT_FUNDS,
 * 403 NOT_YOUR_ORDER, 404 UNKNOWN_ORDER, 409 ORDER_NOT_PAYABLE with details.status, 409
 * ORDER_PENDING with Retry-After: 1).
 */
/** The answer of an order action, counted in flash_sale_order_actions_total. */
function answerOf(deps: AppDeps, action: 'pay' | 'cancel' | 'refund', r: OrderActionResult) {
  deps.metrics.orderActions.inc({ action, outcome: r.ok ? r.order.status : r.code.toLowerCase() })
  if (r.ok) return r.order
  const details = r.status === undefined ? {} : { status: r.status }
  throw new ApiError(r.code, r.message, details, r.code === 'ORDER_PENDING' ? 1 : undefined)
}

export async function paymentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const answer = (action: 'pay' | 'cancel', r: OrderActionResult) => answerOf(deps, action, r)
  app.post<{ Params: { order_id: string }; Body: OrderActionBody }>(
    '/v1/orders/:order_id/pay',
    { bodyLimit: 1_024, ...ORDER_ACTION },
    async (request) =>
      answer('pay', await deps.payments.pay(request.params.order_id, String(request.body.user_id))),
  )
  app.post<{ Params: { order_id: string }; Body: OrderActionBody }>(
    '/v1/orders/:order_id/cancel',
    { bodyLimit: 1_024, ...ORDER_ACTION },
    async (request) =>
      answer('cancel', await deps.payments.cancel(request.params.order_id, String(request.body.user_id))),
  )
}

/**
 * POST /admin/orders/:order_id/refund (admin token, no body): a paid order (confirmed, or paid
 * after a hold) is refunded once: 200 `{ order_id, status: "refunded", …, amount, paid_at,
 * refunded_at }`, the same body for repeats; 409 ORDER_NOT_REFUNDABLE with details.status for an
 * order that was not paid; 404 UNKNOWN_ORDER; 409 ORDER_PENDING + Retry-After: 1 before the worker
 * recorded it.
 */
export async function adminRefundRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.addHook('onRequest', adminGuard(deps.adminToken))
  app.post<{ Params: { order_id: string } }>(
    '/admin/orders/:order_id/refund',
    { bodyLimit: 1_024, ...ORDER_REFUND },
    async (request) => answerOf(deps, 'refund', await deps.payments.refund(request.params.order_id)),
  )
}
