import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { adminGuard } from './admin.js'
import { PRODUCT_PARAMS } from './schemas.js'

/**
 * GET /admin/sales/:product_id/queue/draw (Bearer admin token): the lottery with every entrant
 * and rank, for an audit after the start (see docs/flash-sale.md, "Waiting room"). Entrants are
 * user ids, so the list is not public.
 */
export async function waitingRoomAdminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.addHook('onRequest', adminGuard(deps.adminToken))
  app.get<{ Params: { product_id: string } }>(
    '/admin/sales/:product_id/queue/draw',
    PRODUCT_PARAMS,
    async (request) => deps.waitingRoom.draw(request.params.product_id, true),
  )
}
