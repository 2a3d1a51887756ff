/**
 * Hosts one local stack (startStack) in its own process, so that the stack's in-process parts
 * (the lock nodes' fault proxies, the embedded helpers) do not share the load generator's event
 * loop and CPU share.
 *
 *   node --import tsx bench/checkout/stack-host.ts '<StackOptions as JSON>'
 *
 * Prints one line `{"ready":true,"url":…,"workerMetricsUrl":…,"adminToken":…,"redis":…}` once the
 * stack serves the sale (`redis`: the cluster nodes' redis-server ports and the admin ACL user, for
 * INFO commandstats),
 * and stops the whole stack (service drain, worker, Redis nodes) on SIGTERM/SIGINT or when stdin
 * closes (the bench died), then exits.
 */
import { type StackOptions, startStack } from '@kunci/flash-sale-lab'

const options = JSON.parse(process.argv[2] ?? '{}') as StackOptions
const stack = await startStack(options)
let stopping = false
const stop = () => {
  if (stopping) return
  stopping = true
  void stack.stop().finally(() => process.exit(0))
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
process.stdin.on('end', stop)
process.stdin.resume()
process.stdout.write(
  `${JSON.stringify({
    ready: true,
    url: stack.url,
    workerMetricsUrl: stack.workerMetricsUrl,
    servicePid: stack.service.pid,
    adminToken: stack.adminToken,
    redis: {
      ...stack.redisAdmin,
      nodes: stack.cluster.nodes.map((n) => ({ host: n.host, port: n.serverPort })),
    },
  })}\n`,
)
