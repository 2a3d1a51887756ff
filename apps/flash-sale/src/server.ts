import cluster from 'node:cluster'
import { createServer } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { AggregatorRegistry } from 'prom-client'
import { buildApp } from './app.js'
import type { ServiceConfig } from './config.js'
import { createRuntime } from './runtime.js'

/** After drainTimeoutMs, how long closing the server and the runtime may still take. */
const CLOSE_GRACE_MS = 5_000

export interface ServeOptions {
  /** Processes sharing the port (node:cluster). @defaultValue 1 */
  instances?: number
  /** With instances > 1: the primary serves every instance's metrics summed on this port. */
  metricsPort?: number
  log?: (line: string) => void
}

/**
 * Runs the checkout service until SIGTERM/SIGINT, then drains: readiness turns false at once,
 * the server stops accepting, in-flight requests finish (up to drainTimeoutMs), connections close.
 */
export async function serve(config: ServiceConfig, opts: ServeOptions = {}): Promise<void> {
  const instances = opts.instances ?? 1
  const log = opts.log ?? ((line: string) => console.error(line))
  if (instances > 1 && cluster.isPrimary) return servePrimary(instances, opts.metricsPort, log)

  const runtime = await createRuntime(config)
  if (cluster.isWorker) {
    // Constructing one registers the worker's answer to the primary's metrics requests.
    new AggregatorRegistry()
    AggregatorRegistry.setRegistries([runtime.registry])
  }
  const app = await buildApp(runtime.deps, { logger: true })
  await app.listen({ host: config.host, port: config.port })
  if (config.strategy === 'naive') {
    log(
      '[flash-sale] WARNING: strategy "naive" reads then writes the stock without atomicity: it oversells. Demo only.',
    )
  }
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  log(`[flash-sale] pid ${process.pid} serving ${config.strategy} checkout on http://${config.host}:${port}`)
  await new Promise<void>((resolve) => {
    let draining = false
    const drain = async () => {
      if (draining) return
      draining = true
      app.startDraining()
      if (config.drainDelayMs > 0) await sleep(config.drainDelayMs)
      const timer = setTimeout(() => {
        log('[flash-sale] drain timeout: closing remaining connections')
        app.server.closeAllConnections()
      }, config.drainTimeoutMs)
      try {
        // Bounded: a close that hangs (a client waiting on a node that went away) must not keep
        // the instance in Terminating; what was in flight had drainTimeoutMs to finish.
        const closed = (async () => {
          await app.close()
          await runtime.close()
        })()
        const late = await Promise.race([
          closed.then(() => false),
          sleep(config.drainTimeoutMs + CLOSE_GRACE_MS, undefined, { ref: false }).then(() => true),
        ])
        if (late)
          log(
            `[flash-sale] drain: closing took over ${config.drainTimeoutMs + CLOSE_GRACE_MS} ms; stopping anyway`,
          )
      } finally {
        clearTimeout(timer)
        // The 'message' listener below keeps the IPC channel, and so the instance, alive.
        if (cluster.isWorker) process.disconnect()
        resolve()
      }
    }
    process.once('SIGTERM', drain)
    process.once('SIGINT', drain)
    // node:cluster workers are told to stop by their primary.
    process.on('message', (m) => {
      if (m === 'drain') void drain()
    })
  })
}

async function servePrimary(instances: number, metricsPort: number | undefined, log: (l: string) => void) {
  const aggregator = new AggregatorRegistry()
  const metricsServer =
    metricsPort === undefined
      ? undefined
      : createServer((req, res) => {
          if (req.url !== '/metrics') {
            res.writeHead(404).end()
            return
          }
          aggregator.clusterMetrics().then(
            (text) => res.writeHead(200, { 'content-type': aggregator.contentType }).end(text),
            (err: Error) => res.writeHead(500).end(err.message),
          )
        }).listen(metricsPort, '127.0.0.1')
  let stopping = false
  const fork = () => cluster.fork()
  for (let i = 0; i < instances; i++) fork()
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return
    log(`[flash-sale] instance ${worker.process.pid} exited (${signal ?? code}); starting another`)
    fork()
  })
  await new Promise<void>((resolve) => {
    const stop = () => {
      if (stopping) return
      stopping = true
      for (const w of Object.values(cluster.workers ?? {})) w?.send('drain')
      const check = setInterval(() => {
        if (Object.keys(cluster.workers ?? {}).length === 0) {
          clearInterval(check)
          metricsServer?.close()
          resolve()
        }
      }, 50)
    }
    process.once('SIGTERM', stop)
    process.once('SIGINT', stop)
  })
}
