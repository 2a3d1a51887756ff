import { parseArgs } from 'node:util'
import type { Command } from '@kunci/flash-sale'
import { startStack } from '../stack/local-stack.js'

const HELP = `usage: flash-sale-lab up [--strategy lua|redlock|naive] [--instances 2] [--durability replica|none]
                         [--product 9921] [--stock 100] [--price 49.99] [--port 8080]
                         [--database-url postgres://…] [--queue-url amqp://…] [--tls] [--observe] [--json] [--quiet]
                         [--distinct-hosts] [--cluster-node-timeout-ms 1000]

Starts a whole local stack: a 3+3 Redis Cluster and 5 independent lock nodes (default user off,
an admin ACL user for the operator, a restricted one for the app), SQL (embedded PGlite unless --database-url), the service (--instances processes on one
port) and a worker; creates the sale; prints the URLs, the admin token and the Redis admin login.
--tls: Redis speaks TLS only (clients, cluster bus, replication), with a CA generated for the
stack; the service, worker and exporters trust it (REDIS_TLS_CA_FILE). Ctrl-C stops it all.
--observe also starts Prometheus (alert rules of deploy/prometheus) and a redis_exporter per node
(Debian packages prometheus and prometheus-redis-exporter; node scripts/ensure-tools.mjs installs them).
--distinct-hosts puts every Redis node on its own loopback address (127.1.x.y), so that iptables
rules can partition them (@kunci/topology startNetworkFaults); --cluster-node-timeout-ms sets the
cluster's cluster-node-timeout (Redis's own default is 15000).`

export const upCommand: Command = {
  name: 'up',
  summary: 'start a whole local stack (Redis Cluster, 5 lock nodes, SQL, service, worker) until Ctrl-C',
  async run(argv) {
    let values: Record<string, string | boolean | undefined>
    try {
      values = parseArgs({
        args: argv,
        options: {
          strategy: { type: 'string', default: 'lua' },
          instances: { type: 'string', default: '2' },
          durability: { type: 'string', default: 'replica' },
          product: { type: 'string', default: '9921' },
          stock: { type: 'string', default: '100' },
          price: { type: 'string', default: '49.99' },
          port: { type: 'string', default: '8080' },
          'database-url': { type: 'string' },
          'queue-url': { type: 'string' },
          json: { type: 'boolean', default: false },
          observe: { type: 'boolean', default: false },
          tls: { type: 'boolean', default: false },
          'distinct-hosts': { type: 'boolean', default: false },
          'cluster-node-timeout-ms': { type: 'string', default: '1000' },
          quiet: { type: 'boolean', default: false },
          help: { type: 'boolean', default: false },
        },
      }).values
    } catch (err) {
      console.error(`flash-sale-lab up: ${(err as Error).message}\n\n${HELP}`)
      return 2
    }
    if (values.help) {
      console.log(HELP)
      return 0
    }
    const problems: string[] = []
    const strategy = String(values.strategy)
    if (!['lua', 'redlock', 'naive'].includes(strategy)) problems.push('--strategy: lua, redlock or naive')
    const durability = String(values.durability)
    if (!['replica', 'none'].includes(durability)) problems.push('--durability: replica or none')
    const int = (name: string, min: number, max: number) => {
      const n = Number(values[name])
      if (!Number.isInteger(n) || n < min || n > max)
        problems.push(`--${name}: an integer from ${min} to ${max}`)
      return n
    }
    const instances = int('instances', 1, 32)
    const stock = int('stock', 0, 10_000_000)
    const port = int('port', 0, 65_535)
    const clusterNodeTimeoutMs = int('cluster-node-timeout-ms', 100, 600_000)
    const price = Number(values.price)
    if (!Number.isFinite(price) || price < 0) problems.push('--price: a number ≥ 0')
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(String(values.product)))
      problems.push('--product: an id (A-Z a-z 0-9 _ -)')
    if (problems.length) {
      console.error(`flash-sale-lab up:\n  ${problems.join('\n  ')}`)
      return 2
    }
    const log = (l: string) => values.quiet || console.error(l)
    log(
      `[up] starting a 3+3 Redis Cluster, 5 lock nodes${values.tls ? ' (TLS only)' : ''}, SQL, the service and a worker…`,
    )
    const stack = await startStack({
      strategy: strategy as 'lua',
      durability: durability as 'replica',
      instances,
      port,
      databaseUrl: values['database-url'] as string | undefined,
      queueUrl: values['queue-url'] as string | undefined,
      sale: { productId: String(values.product), stock, price },
      echo: !values.quiet,
      observe: Boolean(values.observe),
      tls: Boolean(values.tls),
      distinctHosts: Boolean(values['distinct-hosts']),
      clusterNodeTimeoutMs,
    })
    const info = {
      url: stack.url,
      admin_token: stack.adminToken,
      strategy,
      product_id: String(values.product),
      stock,
      metrics: stack.metricsUrl,
      worker_metrics: stack.workerMetricsUrl,
      redis_cluster: stack.env.REDIS_CLUSTER_NODES,
      redlock_nodes: stack.env.REDLOCK_NODES,
      database_url: stack.databaseUrl,
      redis_admin_user: stack.redisAdmin.username,
      redis_admin_password: stack.redisAdmin.password,
      redis_tls_ca_file: stack.tls?.caFile ?? null,
      prometheus: stack.prometheusUrl ?? null,
    }
    const tlsCli = stack.tls ? ` --tls --cacert ${stack.tls.caFile}` : ''
    const firstNode = stack.cluster.nodes[0]!
    if (values.json) console.log(JSON.stringify(info))
    else {
      console.log(
        [
          '',
          `flash sale ready (${strategy}): ${stack.url}`,
          `  checkout:  curl -s -XPOST ${stack.url}/v1/checkout -H 'content-type: application/json' -d '{"product_id":${values.product},"user_id":4711}'`,
          `  product:   curl -s ${stack.url}/v1/products/${values.product}`,
          `  admin:     curl -s ${stack.url}/admin/sales/${values.product} -H 'authorization: Bearer ${stack.adminToken}'`,
          `  admin token: ${stack.adminToken}`,
          `  metrics:   ${stack.metricsUrl}  (worker: ${stack.workerMetricsUrl})`,
          `  Redis Cluster: ${info.redis_cluster}`,
          `  lock nodes:    ${info.redlock_nodes}`,
          `  Redis admin:   redis-cli -c -h ${firstNode.host} -p ${firstNode.port}${tlsCli} --user ${stack.redisAdmin.username} --pass ${stack.redisAdmin.password}  (the default user is off)`,
          ...(stack.tls ? [`  TLS only:      trust ${stack.tls.caFile} (REDIS_TLS_CA_FILE)`] : []),
          `  SQL:           ${info.database_url}`,
          ...(stack.prometheusUrl
            ? [`  Prometheus:    ${stack.prometheusUrl}  (alerts: ${stack.prometheusUrl}/alerts)`]
            : []),
          'Ctrl-C stops everything.',
        ].join('\n'),
      )
    }
    // Lasting listeners (not once): while one is registered, @kunci/topology's own signal handler
    // leaves the graceful stop to us instead of killing every server at once.
    let signals = 0
    const onSignal = () => {
      signals++
      if (signals === 1) stopRequested()
    }
    let stopRequested = () => {}
    await new Promise<void>((resolve) => {
      stopRequested = resolve
      process.on('SIGINT', onSignal)
      process.on('SIGTERM', onSignal)
    })
    log('[up] stopping…')
    try {
      await stack.stop()
    } finally {
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
    }
    return 0
  },
}
