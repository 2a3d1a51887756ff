import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { putSale, restockSale, type SaleInput, saleCounts } from '../sale/sale-admin.js'
import { ApiError, invalid } from './api-error.js'
import { PRODUCT_PARAMS, SALE_PUT, SALE_RESTOCK, type SaleBody } from './schemas.js'

const digest = (s: string) => createHash('sha256').update(s).digest()

/** Bearer token, compared in constant time (of equal-length digests, so the length leaks nothing). */
function authorize(request: FastifyRequest, expected: Buffer): void {
  const header = request.headers.authorization ?? ''
  const token = header.startsWith('Bearer ') ? header.slice(7) : ''
  if (!timingSafeEqual(digest(token), expected)) {
    throw new ApiError(
      'UNAUTHORIZED',
      'send Authorization: Bearer <admin token> (printed by `flash-sale up`)',
    )
  }
}

/** What the schema cannot say: dates that parse, cents, the window's order. */
function saleInput(productId: string, b: SaleBody): SaleInput {
  const priceCents = Math.round(b.price * 100)
  if (Math.abs(priceCents - b.price * 100) > 1e-6) throw invalid('price', 'at most 2 decimals')
  const date = (field: 'starts_at' | 'ends_at'): Date | undefined => {
    const v = b[field]
    if (v === undefined || v === null) return undefined
    const d = new Date(v)
    if (Number.isNaN(d.getTime())) throw invalid(field, SALE_PUT.config.rules[field])
    return d
  }
  const startsAt = date('starts_at')
  const endsAt = date('ends_at')
  if (startsAt && endsAt && endsAt <= startsAt) throw invalid('ends_at', 'must be after starts_at')
  const payment = b.payment ?? 'instant'
  // Named for the field that is wrong: a hold needs its duration, an instant sale has none.
  if (payment === 'hold' && b.hold_seconds === undefined)
    throw invalid('hold_seconds', SALE_PUT.config.rules.hold_seconds)
  if (payment === 'instant' && b.hold_seconds !== undefined)
    throw invalid('hold_seconds', SALE_PUT.config.rules.hold_seconds)
  return {
    productId,
    stock: b.stock,
    priceCents,
    name: b.name,
    startsAt,
    endsAt,
    perUserLimit: b.per_user_limit ?? 1,
    payment,
    holdSeconds: payment === 'hold' ? b.hold_seconds : undefined,
  }
}

/** The admin routes' onRequest hook (also used by routes/waiting-room-admin.ts). */
export function adminGuard(adminToken: string): (request: FastifyRequest) => Promise<void> {
  const expected = digest(adminToken)
  return async (request) => authorize(request, expected)
}

/** PUT /admin/sales/:product_id creates or resets a sale; GET reports its counts. */
export async function adminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.addHook('onRequest', adminGuard(deps.adminToken))

  app.put<{ Params: { product_id: string }; Body: SaleBody }>(
    '/admin/sales/:product_id',
    { bodyLimit: 16_384, ...SALE_PUT },
    async (request) => {
      const productId = request.params.product_id
      const input = saleInput(productId, request.body)
      // The optional "waiting_room" field, and the room's setup around the reset.
      return deps.waitingRoom.putSaleWithRoom({
        productId,
        body: request.body,
        strategy: deps.strategy.name,
        putSale: () => putSale(deps.db, deps.store, deps.catalog, input),
      })
    },
  )

  app.post<{ Params: { product_id: string }; Body: { units: number } }>(
    '/admin/sales/:product_id/restock',
    SALE_RESTOCK,
    async (request, reply) => {
      const productId = request.params.product_id
      const done = await restockSale(deps.restocks, productId, request.body.units)
      if (!done) throw new ApiError('UNKNOWN_PRODUCT', `no sale for product ${productId}`)
      // No catalog invalidation: a restock changes the stock, not the product's name or price.
      // 202: recorded, and on sale once Redis confirms it (a worker finishes it); not to be repeated.
      if (done.restock === 'pending') reply.code(202)
      return done
    },
  )

  app.get<{ Params: { product_id: string } }>('/admin/sales/:product_id', PRODUCT_PARAMS, async (request) => {
    const productId = request.params.product_id
    const stock = await deps.strategy.stockView(productId)
    const counts = await saleCounts(deps.orders, productId, stock)
    if (!counts) throw new ApiError('UNKNOWN_PRODUCT', `no sale for product ${productId}`)
    return counts
  })
}
