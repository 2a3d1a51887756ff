import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { parseId } from '../domain/ids.js'
import { adminGuard } from './admin.js'

/**
 * GET /admin/sales/:product_id/queue/draw (Bearer admin token): the lottery with every entrant
 * and rank, for an audit after the start (see docs/flash-sale.md, "Waiting room"). Entrants are
 * user ids, so the list is not public.
 */
export async function waitingRoomAdminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.addHook('onRequest', adminGuard(deps.adminToken))
  app.get<{ Params: { product_id: string } }>('/admin/sales/:product_id/queue/draw', async (request) => {
    const productId = parseId('product_id', request.params.product_id)
    return deps.waitingRoom.draw(productId, true)
  })
}
