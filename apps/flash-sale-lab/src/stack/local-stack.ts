import { randomBytes } from 'node:crypto'
import { chmodSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { aclUserArgs, connectDb, type Durability, migrate, type Strategy } from '@kunci/flash-sale'
import {
  DEFAULT_ADMIN_USERNAME,
  findFreePort,
  generateCertificates,
  type NodeSet,
  type RedisCluster,
  startCluster,
  startNodes,
  type TopologyTls,
  until,
} from '@kunci/topology'
import { type EmbeddedSql, startEmbeddedSql } from '../db/embedded.js'
import { type Observability, startObservability } from '../observe/local-observability.js'
import { StackProcess } from './child.js'

/** The body of PUT /admin/sales/:product_id, in the lab's spelling. */
export interface SaleSpec {
  productId: string
  stock: number
  price?: number
  name?: string
  perUserLimit?: number
  /** The sale opens then (checkouts before answer 409 SALE_NOT_STARTED). */
  startsAt?: Date
  /** The sale's waiting room (docs/flash-sale.md, "Waiting room"); the service's field names. */
  waitingRoom?: {
    admit_per_second: number
    max_admitted: number
    admission_seconds: number
    stock_factor?: number
    drop_after_seconds?: number
  }
}

export interface StackOptions {
  /** @defaultValue 'lua' */
  strategy?: Strategy
  /** Service processes sharing the port. @defaultValue 2 */
  instances?: number
  /** @defaultValue 'replica' */
  durability?: Durability
  /** 0 = a free port. @defaultValue 8080 */
  port?: number
  /** PostgreSQL URL; without it an embedded PGlite is started. */
  databaseUrl?: string
  /** amqp:// URL for the RabbitMQ relay. */
  queueUrl?: string
  /** A sale to create once the service is ready. */
  sale?: SaleSpec
  /** Also start the 5 independent lock nodes. @defaultValue true */
  lockNodes?: boolean
  /** Extra environment for the service and worker (e.g. CLAIM_IDLE_MS in tests). */
  env?: Record<string, string>
  /** Echo the children's output on stderr. @defaultValue false */
  echo?: boolean
  /** Start the worker process. @defaultValue true */
  worker?: boolean
  /** Also start Prometheus (with the alert rules of deploy/) and a redis_exporter per node. @defaultValue false */
  observe?: boolean
  /**
   * TLS only between every client and every Redis node (and on the cluster bus and replication):
   * one CA is generated for the stack, the service and worker get it as REDIS_TLS_CA_FILE.
   * @defaultValue false
   */
  tls?: boolean
  /**
   * Every Redis node (cluster and lock nodes) on its own loopback address (topology's
   * `distinctHosts`), so that startNetworkFaults can partition them with iptables.
   * @defaultValue false
   */
  distinctHosts?: boolean
  /** The cluster's cluster-node-timeout. @defaultValue 1000 (topology's default) */
  clusterNodeTimeoutMs?: number
  /**
   * One more service process (`serve --instances 1`, on a port of its own: `solo`, `soloUrl`) run
   * as this user, so that `cutUid(uid, nodes)` cuts this one instance off while the others keep
   * their links. We must be root; uid 65534 (nobody) works. @defaultValue undefined (none)
   */
  soloInstance?: { uid: number; gid?: number }
}

export interface LocalStack {
  readonly url: string
  readonly adminToken: string
  readonly cluster: RedisCluster
  readonly lockNodes: NodeSet | undefined
  /** The operator's ACL user on every Redis node (the default user is off). */
  readonly redisAdmin: { username: string; password: string }
  /** With `tls`: the stack's CA (caFile is what REDIS_TLS_CA_FILE points to). */
  readonly tls: TopologyTls | undefined
  readonly databaseUrl: string
  readonly env: Record<string, string>
  readonly service: StackProcess
  readonly worker: StackProcess
  /** With `soloInstance`: the service instance that runs as that uid, and its URL. */
  readonly solo: StackProcess | undefined
  readonly soloUrl: string | undefined
  readonly metricsUrl: string | undefined
  readonly workerMetricsUrl: string
  /** With `observe`: the Prometheus UI/API and the exporters' /metrics. */
  readonly prometheusUrl: string | undefined
  readonly exporterUrls: string[]
  /** PUT /admin/sales/:product_id. */
  putSale(sale: SaleSpec): Promise<unknown>
  stop(): Promise<void>
}

/**
 * The wallet balance a user of `up`, the demo and the tests starts with (DEFAULT_WALLET_BALANCE):
 * 20 units at the lab's default price of 49.99, so today's flows keep working.
 */
export const LAB_WALLET_BALANCE = '1000.00'

const random = (bytes: number) => randomBytes(bytes).toString('base64url')

/** Until the service answers /readyz 200; fails at once if it exits first. */
function waitReady(url: string, timeoutMs: number, alive: () => boolean): Promise<void> {
  return until(
    async () => {
      if (!alive()) throw new Error(`the service exited before it was ready (${url})`)
      return fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    },
    `the service at ${url} to be ready`,
    { timeoutMs, intervalMs: 100 },
  )
}

/**
 * The whole local stack of `flash-sale-lab up`: a 3+3 Redis Cluster and 5 independent lock nodes
 * (the `default` user off, an admin ACL user for the operator, topology and the exporters, an ACL
 * user for the app that may not run KEYS, FLUSHALL, CONFIG SET, DEBUG…; TLS only with `tls`), SQL (PostgreSQL or the embedded PGlite), migrations, the service (node:cluster
 * instances on one port) and a worker, as separate processes.
 */
export async function startStack(options: StackOptions = {}): Promise<LocalStack> {
  const strategy = options.strategy ?? 'lua'
  const adminPassword = random(18)
  const appUser = 'flash-sale'
  const appPassword = random(18)
  const adminToken = random(24)
  const waitingRoomSecret = random(32)
  const userArgs = ['--user', ...aclUserArgs(appUser, appPassword)]
  const redisAdmin = { username: DEFAULT_ADMIN_USERNAME, password: adminPassword }
  const cleanups: (() => Promise<void>)[] = []
  const cleanup = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => {})
  }
  try {
    let tls: TopologyTls | undefined
    if (options.tls) {
      // One CA for the cluster and the lock nodes, so clients trust one file.
      const dir = mkdtempSync(join(tmpdir(), 'flash-sale-tls-'))
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
      tls = await generateCertificates(dir)
      // The solo instance runs as another user and must read the CA (the keys stay 0600).
      if (options.soloInstance) chmodSync(dir, 0o755)
    }
    const security = {
      adminUser: redisAdmin,
      ...(tls && { tls: { certificates: tls } }),
      // topology binds 127.0.0.1 only; protected mode on as well, as a production node would run.
      extraArgs: [...userArgs, '--protected-mode', 'yes'],
    }
    const distinctHosts = options.distinctHosts ?? false
    const [cluster, lockNodes] = await Promise.all([
      startCluster({
        ...security,
        distinctHosts,
        ...(options.clusterNodeTimeoutMs !== undefined && { nodeTimeoutMs: options.clusterNodeTimeoutMs }),
      }),
      options.lockNodes === false
        ? undefined
        : startNodes({ count: 5, aof: 'everysec', ...security, distinctHosts }),
    ])
    cleanups.push(() => cluster.stop())
    if (lockNodes) cleanups.push(() => lockNodes.stop())
    let sql: EmbeddedSql | undefined
    let databaseUrl = options.databaseUrl
    if (!databaseUrl) {
      sql = await startEmbeddedSql()
      cleanups.push(() => sql!.stop())
      databaseUrl = sql.url
    }
    const db = connectDb(databaseUrl, 1)
    try {
      await migrate(db)
    } finally {
      await db.end()
    }
    const port = options.port === 0 || options.port === undefined ? await findFreePort() : options.port
    const workerPort = await findFreePort()
    const instances = options.instances ?? 2
    const metricsPort = instances > 1 ? await findFreePort() : undefined
    const env: Record<string, string> = {
      STRATEGY: strategy,
      DURABILITY: options.durability ?? 'replica',
      REDIS_CLUSTER_NODES: cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(','),
      REDIS_USERNAME: appUser,
      REDIS_PASSWORD: appPassword,
      ...(tls ? { REDIS_TLS_CA_FILE: tls.caFile } : {}),
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN: adminToken,
      WAITING_ROOM_SECRET: waitingRoomSecret,
      HOST: '127.0.0.1',
      PORT: String(port),
      WORKER_PORT: String(workerPort),
      ...(lockNodes ? { REDLOCK_NODES: lockNodes.nodes.map((n) => `${n.host}:${n.port}`).join(',') } : {}),
      ...(options.queueUrl ? { QUEUE_URL: options.queueUrl } : {}),
      // Every user of the local stack starts with a wallet that buys a few units (the service's
      // production default is 0); a test or the demo sets its own with env or PUT /admin/wallets.
      DEFAULT_WALLET_BALANCE: LAB_WALLET_BALANCE,
      ...options.env,
    }
    const echo = options.echo ?? false
    const serveArgs = ['serve', '--instances', String(instances)]
    if (metricsPort !== undefined) serveArgs.push('--metrics-port', String(metricsPort))
    const service = new StackProcess({ name: 'service', args: serveArgs, env, echo })
    const worker = new StackProcess({ name: 'worker', args: ['worker'], env, echo })
    service.start()
    cleanups.push(() => service.stop())
    // The service's instances share one process (node:cluster), so one of them cannot be told
    // apart by uid: the solo instance is a process of its own, on its own port.
    let solo: StackProcess | undefined
    let soloUrl: string | undefined
    if (options.soloInstance) {
      const soloPort = await findFreePort()
      solo = new StackProcess({
        name: 'solo',
        args: ['serve', '--instances', '1'],
        env: { ...env, PORT: String(soloPort) },
        echo,
        user: options.soloInstance,
      })
      solo.start()
      cleanups.push(() => solo!.stop())
      soloUrl = `http://127.0.0.1:${soloPort}`
    }
    if (options.worker !== false) {
      worker.start()
      cleanups.push(() => worker.stop())
    }
    const url = `http://127.0.0.1:${port}`
    await waitReady(url, 60_000, () => service.running)
    if (solo && soloUrl) await waitReady(soloUrl, 60_000, () => solo.running)
    const putSale = async (sale: SaleSpec) => {
      // A 503 says the sale's replica has not acknowledged it yet (a loaded machine, a failover
      // under way): repeat the call, as the answer asks, for up to 30 s.
      const deadline = Date.now() + 30_000
      for (;;) {
        const res = await fetch(`${url}/admin/sales/${sale.productId}`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            stock: sale.stock,
            price: sale.price ?? 49.99,
            name: sale.name,
            per_user_limit: sale.perUserLimit,
            starts_at: sale.startsAt?.toISOString(),
            waiting_room: sale.waitingRoom,
          }),
        })
        const body = await res.json()
        if (res.ok) return body
        if (res.status !== 503 || Date.now() > deadline)
          throw new Error(`PUT /admin/sales/${sale.productId}: ${res.status} ${JSON.stringify(body)}`)
        await sleep(1_000 * Number(res.headers.get('retry-after') ?? 1))
      }
    }
    if (options.sale) await putSale(options.sale)
    let observability: Observability | undefined
    if (options.observe) {
      const dir = mkdtempSync(join(tmpdir(), 'flash-sale-observe-'))
      cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
      const metricsTarget = metricsPort === undefined ? `127.0.0.1:${port}` : `127.0.0.1:${metricsPort}`
      // The exporters log in as the operator: they need INFO, CONFIG GET, CLUSTER INFO, SLOWLOG…
      const access = { ...redisAdmin, ...(tls && { tlsCaFile: tls.caFile }) }
      const redis = [
        ...cluster.nodes.map((n) => ({ addr: `${n.host}:${n.serverPort}`, ...access, job: 'redis-cluster' })),
        ...(lockNodes?.nodes ?? []).map((n) => ({
          addr: `${n.host}:${n.serverPort}`,
          ...access,
          job: 'redis-redlock',
        })),
      ]
      observability = await startObservability({
        dir,
        serviceTargets: [metricsTarget],
        workerTargets: [`127.0.0.1:${workerPort}`],
        redis,
      })
      cleanups.push(() => observability!.stop())
    }
    let stopped: Promise<void> | undefined
    return {
      url,
      adminToken,
      cluster,
      lockNodes,
      redisAdmin,
      tls,
      databaseUrl,
      env,
      service,
      worker,
      solo,
      soloUrl,
      metricsUrl: metricsPort === undefined ? `${url}/metrics` : `http://127.0.0.1:${metricsPort}/metrics`,
      workerMetricsUrl: `http://127.0.0.1:${workerPort}/metrics`,
      prometheusUrl: observability?.prometheusUrl,
      exporterUrls: observability?.exporterUrls ?? [],
      putSale,
      stop: () => (stopped ??= cleanup()),
    }
  } catch (err) {
    await cleanup()
    throw err
  }
}
