import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { ApiError, invalid } from '../domain/errors.js'
import { parseId } from '../domain/ids.js'
import { saleKeys } from '../redis/keys.js'
import { putSale, type SaleInput, saleCounts } from '../sale/sale-admin.js'

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

function parseSaleBody(productId: string, body: unknown): SaleInput {
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw invalid('body', 'expected a JSON object')
  const b = body as Record<string, unknown>
  const stock = b.stock
  if (!Number.isSafeInteger(stock) || (stock as number) < 0 || (stock as number) > 10_000_000) {
    throw invalid('stock', 'an integer from 0 to 10000000')
  }
  const price = b.price
  if (typeof price !== 'number' || !Number.isFinite(price) || price < 0 || price > 1e9) {
    throw invalid('price', 'a number from 0 to 1e9 (currency units, at most 2 decimals)')
  }
  const priceCents = Math.round(price * 100)
  if (Math.abs(priceCents - price * 100) > 1e-6) throw invalid('price', 'at most 2 decimals')
  if (b.name !== undefined && (typeof b.name !== 'string' || b.name.length < 1 || b.name.length > 200)) {
    throw invalid('name', 'a string of 1 to 200 characters')
  }
  const date = (field: string): Date | undefined => {
    const v = b[field]
    if (v === undefined || v === null) return undefined
    const d = typeof v === 'string' ? new Date(v) : undefined
    if (!d || Number.isNaN(d.getTime()))
      throw invalid(field, 'an ISO 8601 date-time, e.g. 2026-11-27T00:00:00Z, or null')
    return d
  }
  const startsAt = date('starts_at')
  const endsAt = date('ends_at')
  if (startsAt && endsAt && endsAt <= startsAt) throw invalid('ends_at', 'must be after starts_at')
  const limit = b.per_user_limit ?? 1
  if (!Number.isSafeInteger(limit) || (limit as number) < 1 || (limit as number) > 1_000) {
    throw invalid('per_user_limit', 'an integer from 1 to 1000')
  }
  return {
    productId,
    stock: stock as number,
    priceCents,
    name: b.name as string | undefined,
    startsAt,
    endsAt,
    perUserLimit: limit as number,
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

  app.put<{ Params: { product_id: string } }>(
    '/admin/sales/:product_id',
    { bodyLimit: 16_384 },
    async (request) => {
      const productId = parseId('product_id', request.params.product_id)
      const input = parseSaleBody(productId, request.body)
      // The optional "waiting_room" field, and the room's setup around the reset.
      return deps.waitingRoom.putSaleWithRoom({
        productId,
        body: request.body,
        strategy: deps.strategy.name,
        putSale: () => putSale(deps.db, deps.store, deps.catalog, input),
      })
    },
  )

  app.get<{ Params: { product_id: string } }>('/admin/sales/:product_id', async (request) => {
    const productId = parseId('product_id', request.params.product_id)
    const inRedis = deps.strategy.name === 'redlock' ? undefined : await deps.store.remaining(productId)
    const dead = deps.strategy.name === 'redlock' ? 0 : await deps.store.client.xlen(saleKeys(productId).dead)
    const counts = await saleCounts(deps.db, productId, inRedis, dead)
    if (!counts) throw new ApiError('UNKNOWN_PRODUCT', `no sale for product ${productId}`)
    return counts
  })
}
