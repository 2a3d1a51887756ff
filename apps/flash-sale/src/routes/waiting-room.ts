import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { invalid } from '../domain/errors.js'
import { parseId } from '../domain/ids.js'
import { QUEUE_PAGE_HEADERS, renderQueuePage } from '../waiting-room/page.js'

/**
 * The waiting room (src/waiting-room/): POST /v1/sales/:product_id/queue { user_id } joins,
 * GET /v1/queue/:ticket polls (and keeps the place), GET /v1/sales/:product_id/queue/draw shows
 * the lottery's commitment (and its secret once the sale has started), GET /queue/:product_id
 * is the page people use.
 */
export async function waitingRoomRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const room = deps.waitingRoom

  app.post<{ Params: { product_id: string } }>(
    '/v1/sales/:product_id/queue',
    { bodyLimit: 1_024 },
    async (request) => {
      const productId = parseId('product_id', request.params.product_id)
      const body = request.body
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        throw invalid('body', 'expected a JSON object { "user_id": … }')
      }
      const userId = parseId('user_id', (body as Record<string, unknown>).user_id)
      return room.join(productId, userId)
    },
  )

  // A wildcard, not a :param: find-my-way turns a parameter over 100 characters into a 404, and
  // a ticket of any length must be answered 403 when it is not ours.
  app.get<{ Params: { '*': string } }>('/v1/queue/*', async (request) => room.poll(request.params['*']))

  app.get<{ Params: { product_id: string } }>('/v1/sales/:product_id/queue/draw', async (request) => {
    const productId = parseId('product_id', request.params.product_id)
    return room.draw(productId, false)
  })

  app.get<{ Params: { product_id: string } }>('/queue/:product_id', async (request, reply) => {
    const productId = parseId('product_id', request.params.product_id)
    return reply.headers(QUEUE_PAGE_HEADERS).type('text/html; charset=utf-8').send(renderQueuePage(productId))
  })
}
