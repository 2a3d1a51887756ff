import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { QUEUE_PAGE_HEADERS, renderQueuePage } from '../waiting-room/page.js'
import { PRODUCT_PARAMS, QUEUE_JOIN } from './schemas.js'

/**
 * The waiting room (src/waiting-room/): POST /v1/sales/:product_id/queue { user_id } joins,
 * GET /v1/queue/:ticket polls (and keeps the place), GET /v1/sales/:product_id/queue/draw shows
 * the lottery's commitment (and its secret once the sale has started), GET /queue/:product_id
 * is the page people use.
 */
export async function waitingRoomRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const room = deps.waitingRoom

  app.post<{ Params: { product_id: string }; Body: { user_id: number | string } }>(
    '/v1/sales/:product_id/queue',
    { bodyLimit: 1_024, ...QUEUE_JOIN },
    async (request) => room.join(request.params.product_id, String(request.body.user_id)),
  )

  // A wildcard, not a :param: find-my-way turns a parameter over 100 characters into a 404, and
  // a ticket of any length must be answered 403 when it is not ours.
  app.get<{ Params: { '*': string } }>('/v1/queue/*', async (request) => room.poll(request.params['*']))

  app.get<{ Params: { product_id: string } }>(
    '/v1/sales/:product_id/queue/draw',
    PRODUCT_PARAMS,
    async (request) => room.draw(request.params.product_id, false),
  )

  app.get<{ Params: { product_id: string } }>('/queue/:product_id', PRODUCT_PARAMS, async (request, reply) =>
    reply
      .headers(QUEUE_PAGE_HEADERS)
      .type('text/html; charset=utf-8')
      .send(renderQueuePage(request.params.product_id)),
  )
}
