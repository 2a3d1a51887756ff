import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'

/**
 * /healthz: the process answers (liveness). /readyz: every sale's Redis slot and SQL reachable,
 * and not draining
 * (readiness: a draining pod leaves the Service before it stops). /metrics: Prometheus.
 */
export async function healthRoutes(
  app: FastifyInstance,
  deps: AppDeps & { draining: () => boolean },
): Promise<void> {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    if (deps.draining()) return reply.code(503).send({ ready: false, reason: 'draining' })
    const reason = await deps.unready().catch(() => 'readiness check failed')
    return reason === undefined
      ? reply.code(200).send({ ready: true })
      : reply.code(503).send({ ready: false, reason })
  })
  app.get('/metrics', async (_request, reply) => {
    const text = await deps.registry.metrics()
    return reply.type(deps.registry.contentType).send(text)
  })
}
