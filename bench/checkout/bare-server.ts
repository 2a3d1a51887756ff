/**
 * The baseline: a bare fastify 5 server in the service's process model (a node:cluster primary
 * with `instances` workers sharing one port, logger at 'warn' as the service has it), answering
 * POST /v1/checkout with a parsed JSON body and a constant JSON answer. Everything the checkout
 * service adds on top of this (validation, load shedding, metrics, Redis, WAIT) is what the
 * benchmark's ratio measures.
 *
 *   node --import tsx bench/checkout/bare-server.ts <port> <instances>
 *
 * The primary prints one line `{"ready":true,"pid":…}` on stdout once every worker listens, and on
 * SIGTERM/SIGINT stops its workers and exits.
 */
import cluster from 'node:cluster'
import Fastify from 'fastify'

const ANSWER = Object.freeze({ order_id: '9921.bare', status: 'confirmed' })

async function worker(port: number): Promise<void> {
  const app = Fastify({ logger: { level: 'warn' }, bodyLimit: 16_384 })
  app.removeContentTypeParser('text/plain')
  app.post('/v1/checkout', { bodyLimit: 1_024 }, async (request) => {
    // Touch the parsed body, as a handler that reads it would.
    const body = request.body as { product_id?: unknown } | null
    return body?.product_id === undefined ? { ...ANSWER, product_id: null } : ANSWER
  })
  await app.listen({ host: '127.0.0.1', port })
  process.send?.('listening')
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0))
  })
}

function primary(instances: number): void {
  let listening = 0
  for (let i = 0; i < instances; i++) {
    const w = cluster.fork()
    w.on('message', (m) => {
      if (m === 'listening' && ++listening === instances)
        process.stdout.write(`${JSON.stringify({ ready: true, pid: process.pid })}\n`)
    })
  }
  cluster.on('exit', (w, code, signal) => {
    if (!stopping) {
      process.stderr.write(`[bare] worker ${w.process.pid} exited (${signal ?? code})\n`)
      process.exitCode = 1
    }
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit()
  })
  let stopping = false
  const stop = () => {
    stopping = true
    for (const w of Object.values(cluster.workers ?? {})) w?.send('stop')
    // A worker that does not close within 5 s is killed.
    setTimeout(() => {
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL')
    }, 5_000).unref()
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

const port = Number(process.argv[2])
const instances = Number(process.argv[3] ?? 2)
if (!Number.isInteger(port) || port <= 0 || !Number.isInteger(instances) || instances < 1) {
  process.stderr.write('usage: bare-server.ts <port> <instances>\n')
  process.exit(2)
}
if (cluster.isPrimary) primary(instances)
else await worker(port)
