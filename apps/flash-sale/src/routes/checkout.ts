import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { busy, DomainRefusalError } from '../domain/refusals.js'
import { ApiError, fromRefusal, HTTP_STATUS, refusalBody, sendError, unavailableError } from './api-error.js'
import { RefusalLane } from './refusal-lane.js'
import { CHECKOUT, type CheckoutBody } from './schemas.js'

/** Checkout bodies are ~40 bytes; anything much larger is not a checkout. */
export const CHECKOUT_BODY_LIMIT = 1_024

/**
 * POST /v1/checkout { product_id, user_id } [Idempotency-Key]. Validates, sheds load before any
 * Redis or SQL work (event-loop delay → 503, too many in flight → 429), then hands over to the
 * strategy and translates its answer.
 */
export async function checkoutRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const strategy = deps.strategy.name
  let inflight = 0
  if (deps.maxEventLoopDelayMs > 0) {
    await app.register(underPressure, {
      maxEventLoopDelay: deps.maxEventLoopDelayMs,
      retryAfter: 1,
      pressureHandler: (_req, reply, type) => {
        deps.metrics.shed.inc({ reason: String(type) })
        deps.metrics.checkouts.inc({ strategy, outcome: 'unavailable', status: '503' })
        sendError(reply, unavailableError('this instance is overloaded', 1))
      },
    })
  }

  const room = deps.waitingRoom
  const ticketOf = (request: { headers: Record<string, unknown> }) => request.headers['waiting-room-ticket']

  app.post<{ Body: CheckoutBody }>(
    '/v1/checkout',
    {
      bodyLimit: CHECKOUT_BODY_LIMIT,
      ...CHECKOUT,
      // A body the refusal lane read but could not answer: fastify parses it as sent.
      ...(deps.refusalLane && { preParsing: RefusalLane.replay }),
    },
    async (request, reply) => {
      const started = performance.now()
      let status = 500
      let outcome = 'error'
      try {
        const { product_id: rawProduct, user_id: rawUser } = request.body
        const productId = String(rawProduct)
        const userId = String(rawUser)
        const idempotencyKey = request.headers['idempotency-key'] as string | undefined
        if (inflight >= deps.maxInflight) {
          deps.metrics.shed.inc({ reason: 'inflight' })
          throw fromRefusal(busy('too many checkouts in flight on this instance', 1))
        }
        inflight++
        deps.metrics.inflight.inc()
        try {
          // With a waiting room on this sale: an admitted ticket of this user, or a 429/403 here.
          // Skipped where the strategy knows the sale has no room (reserve.lua checks it again).
          const known = deps.strategy.roomGen(productId)
          let roomGen = known === '' ? undefined : await room.admit(productId, userId, ticketOf(request))
          let result = await deps.strategy.checkout({ productId, userId, idempotencyKey, roomGen })
          if (result.ok === 'gate') {
            roomGen = await room.admit(productId, userId, ticketOf(request))
            result = await deps.strategy.checkout({ productId, userId, idempotencyKey, roomGen })
          }
          if (result.ok === 'gate') throw new Error('the waiting room changed twice during one checkout')
          if (!result.ok) {
            status = HTTP_STATUS[result.code]
            outcome = result.code.toLowerCase()
            // A refusal is the flood's common answer: sent as is, without an Error and the
            // error handler (5xx still go through it, to be logged).
            if (status >= 500) throw fromRefusal(result)
            if (result.retryAfterS !== undefined) reply.header('retry-after', String(result.retryAfterS))
            stampServerTiming(reply, started)
            return reply.code(status).send(refusalBody(result))
          }
          if (result.remaining !== undefined)
            deps.metrics.stockRemaining.set({ product_id: productId }, result.remaining)
          status = result.status === 'pending' ? 202 : 200
          outcome = result.status
          stampServerTiming(reply, started)
          return reply.code(status).send({
            order_id: result.orderId,
            status: result.status,
            product_id: rawProduct,
            user_id: rawUser,
            // Hold sales: pay (POST /v1/orders/:order_id/pay) before this, or the unit goes back.
            ...(result.payByMs !== undefined && { pay_by: new Date(result.payByMs).toISOString() }),
          })
        } finally {
          inflight--
          deps.metrics.inflight.dec()
        }
      } catch (caught) {
        // The waiting room's gate refuses in the domain's terms: mapped here, so the metrics
        // below count its status and code, and the error handler sends the same answer.
        const err = caught instanceof DomainRefusalError ? fromRefusal(caught.refusal) : caught
        if (err instanceof ApiError) {
          status = err.status
          outcome = err.code.toLowerCase()
        }
        throw err
      } finally {
        const ms = performance.now() - started
        // Errors (5xx, ApiError) are sent later by the error handler: the header goes with them.
        if (!reply.sent) stampServerTiming(reply, started)
        deps.metrics.checkouts.inc({ strategy, outcome, status: String(status) })
        deps.metrics.checkoutDuration.observe({ strategy }, ms / 1_000)
      }
    },
  )
}

/**
 * The time this instance spent on the request (W3C Server-Timing): a client that waited longer
 * waited in queues before it (issue 13's tests check the deadline with it). Set before the reply
 * is sent: a header set after send() is silently dropped (issue 20 found 200/202/409 without it).
 */
function stampServerTiming(reply: FastifyReply, started: number): void {
  reply.header('server-timing', `app;dur=${(performance.now() - started).toFixed(1)}`)
}
