import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { withTimeout } from '../runtime-timeout.js'
import { ApiError } from './api-error.js'
import { PRODUCT_PARAMS } from './schemas.js'

/** The catalog read (cache, SQL behind it) and the live stock, together. */
const PRODUCT_DEADLINE_MS = 2_500

/** GET /v1/products/:product_id → name and price (cached catalog), remaining stock (live). */
export async function productRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { product_id: string } }>(
    '/v1/products/:product_id',
    PRODUCT_PARAMS,
    async (request, reply) => {
      const productId = request.params.product_id
      const started = performance.now()
      let product: Awaited<ReturnType<typeof deps.catalog.product>>
      let remaining: number | undefined
      try {
        // Bounded like a checkout: during a failover this answers 503 instead of hanging.
        ;[product, remaining] = await withTimeout(
          Promise.all([deps.catalog.product(productId), deps.strategy.remaining(productId)]),
          PRODUCT_DEADLINE_MS,
        )
      } finally {
        reply.header('server-timing', `app;dur=${(performance.now() - started).toFixed(1)}`)
      }
      if (product === undefined) throw new ApiError('UNKNOWN_PRODUCT', `no product ${productId}`)
      return {
        product_id: productId,
        name: product.name,
        price: product.price_cents / 100,
        remaining_stock: remaining ?? 0,
      }
    },
  )
}
