import Fastify, { type FastifyInstance } from 'fastify'
import type { AppDeps } from './app-deps.js'
import { registerErrorHandling } from './plugins/errors.js'
import { adminRoutes } from './routes/admin.js'
import { CHECKOUT_BODY_LIMIT, checkoutRoutes } from './routes/checkout.js'
import { healthRoutes } from './routes/health.js'
import { orderRoutes } from './routes/orders.js'
import { adminRefundRoutes, paymentRoutes } from './routes/payments.js'
import { productRoutes } from './routes/products.js'
import { RefusalLane } from './routes/refusal-lane.js'
import { waitingRoomRoutes } from './routes/waiting-room.js'
import { waitingRoomAdminRoutes } from './routes/waiting-room-admin.js'
import { adminWalletRoutes, walletRoutes } from './routes/wallets.js'

export interface App extends FastifyInstance {
  /** Readiness turns false; in-flight requests go on (server.ts closes after this). */
  startDraining(): void
}

/** The HTTP layer, without listen(): tests use `app.inject()`, server.ts listens. */
export async function buildApp(deps: AppDeps, opts: { logger?: boolean } = {}): Promise<App> {
  const fastify = Fastify({
    logger: opts.logger ? { level: 'warn' } : false,
    // Ids in bodies are small; anything deeply nested is not ours.
    bodyLimit: 16_384,
    // Requests that reach an instance while it drains are served, not refused: readiness is
    // already false, so the load balancer stops sending, and close() waits for them.
    return503OnClosing: false,
    requestTimeout: 30_000,
    // Route schemas are exact (routes/schemas.ts): no coercion of `true` into a product id 1.
    ajv: { customOptions: { coerceTypes: false } },
    // A sold-out sale's refusals from memory, answered before fastify's routing (refusal-lane.ts).
    ...(deps.refusalLane && {
      serverFactory: new RefusalLane({
        strategy: deps.strategy,
        metrics: deps.metrics,
        bodyLimit: CHECKOUT_BODY_LIMIT,
        maxRecording: deps.maxInflight,
      }).serverFactory,
    }),
  })
  let draining = false
  const app: App = Object.assign(fastify, {
    startDraining: () => {
      draining = true
    },
  })
  // Fastify parses text/plain by default; a checkout is JSON only, anything else is a 415.
  app.removeContentTypeParser('text/plain')
  registerErrorHandling(app)
  await app.register(healthRoutes, { ...deps, draining: () => draining })
  await app.register(checkoutRoutes, deps)
  await app.register(orderRoutes, deps)
  await app.register(paymentRoutes, deps)
  await app.register(productRoutes, deps)
  await app.register(adminRoutes, deps)
  await app.register(waitingRoomRoutes, deps)
  await app.register(waitingRoomAdminRoutes, deps)
  await app.register(walletRoutes, deps)
  await app.register(adminWalletRoutes, deps)
  await app.register(adminRefundRoutes, deps)
  return app
}
