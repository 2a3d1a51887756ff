import { readFileSync } from 'node:fs'
import { ServiceError } from './errors.js'

/**
 * The service's configuration: the only module that reads `process.env`. Every problem is
 * collected and reported at once (one line each), so a deployment fails with the whole list
 * instead of one error per restart.
 */

export type Strategy = 'lua' | 'redlock' | 'naive'
export type Durability = 'replica' | 'none'

export interface HostPort {
  host: string
  port: number
}

/** TLS to Redis: ioredis `tls` options (PEM texts, read once at start). */
export interface RedisTls {
  /** The CA to trust instead of the system's (REDIS_TLS_CA_FILE). */
  ca?: string
  /** A client certificate and key, for servers with `tls-auth-clients yes`. */
  cert?: string
  key?: string
}

export interface ServiceConfig {
  /** Checkout strategy. @defaultValue 'lua' */
  strategy: Strategy
  /** `replica`: a reservation is answered 200 only after WAIT 1 confirms a replica holds it. @defaultValue 'replica' */
  durability: Durability
  /** How long WAIT may take before the answer becomes 202 pending. @defaultValue 50 */
  waitTimeoutMs: number
  /** Redis Cluster seed nodes (REDIS_CLUSTER_NODES), or one standalone node (REDIS_URL). */
  redis: { cluster: HostPort[] } | { url: string }
  /** The independent lock nodes of the `redlock` strategy (REDLOCK_NODES). @defaultValue [] */
  redlockNodes: HostPort[]
  redisUsername: string | undefined
  redisPassword: string | undefined
  /**
   * TLS to every Redis (cluster, standalone, lock nodes): on with REDIS_TLS=true, a rediss:// URL or
   * REDIS_TLS_CA_FILE. @defaultValue undefined (plain TCP)
   */
  redisTls: RedisTls | undefined
  /** PostgreSQL connection string (the embedded PGlite of `flash-sale-lab up` speaks the same protocol). */
  databaseUrl: string
  /** amqp:// URL: orders are relayed from the stream to RabbitMQ. @defaultValue undefined (stream only) */
  queueUrl: string | undefined
  /** The durable RabbitMQ queue of orders (its dead letters go to `<name>.dead`). @defaultValue 'flash-sale.orders' */
  queueName: string
  adminToken: string
  /**
   * Signs waiting-room tickets (HMAC); the same on every instance, ≥ 32 characters. Without it
   * no sale can have a waiting room. @defaultValue undefined
   */
  waitingRoomSecret: string | undefined
  host: string
  /** @defaultValue 8080 */
  port: number
  /** The worker's /metrics, /healthz, /readyz. @defaultValue 9464 */
  workerPort: number
  /** Checkouts in flight per instance before answering 429. @defaultValue 1024 */
  maxInflight: number
  /** Event-loop delay above which requests are shed with 503. @defaultValue 250 */
  maxEventLoopDelayMs: number
  /**
   * `lua`: answer a sold-out sale's refusals from memory (sale/sale-snapshots.ts); false sends
   * every checkout to Redis, as before (a kill switch, and the tests' reference). @defaultValue true
   */
  localAnswers: boolean
  /**
   * With local answers: the refusals from memory are given before fastify's routing
   * (routes/refusal-lane.ts), byte for byte the route's answers at about the cost of a bare
   * endpoint; false gives them through the route (the tests' reference). @defaultValue true
   */
  refusalLane: boolean
  /**
   * `lua`/`naive`: group commit of a sale's reservations and recorded refusals. While the sale's
   * last script call is out and younger than this (ms), the checkouts that arrive wait for its
   * answer and go together in the next call (sale/turn-batcher.ts); a call out longer no longer
   * holds the next one back. 0 sends one call per event-loop turn. @defaultValue 20
   */
  batchHoldMs: number
  /** `redlock`: how long a checkout waits for the product's lock before 429. @defaultValue 250 */
  lockWaitMs: number
  /** Worker: idle time after which another worker claims a pending order event. @defaultValue 15000 */
  claimIdleMs: number
  /** Worker: deliveries of one event before it goes to the dead-letter stream. @defaultValue 5 */
  maxDeliveries: number
  /** SIGTERM: longest time to finish in-flight work. @defaultValue 10000 */
  drainTimeoutMs: number
  /**
   * SIGTERM: keep serving this long with readiness already false, so load balancers stop sending
   * before the listener closes (connections still in the accept queue would be reset). Kubernetes
   * users can set it instead of a preStop sleep. @defaultValue 0
   */
  drainDelayMs: number
  /**
   * The balance, in cents, of a user who has no wallet yet (DEFAULT_WALLET_BALANCE, in currency
   * units: `150.00`). 0 in production: a user pays with what was put in the wallet
   * (PUT /admin/wallets/:user_id). `flash-sale-lab up`, the demo and the tests set 1000.00 (20
   * units at the lab's default price of 49.99; LAB_WALLET_BALANCE in the lab's local stack).
   * @defaultValue 0
   */
  defaultWalletBalanceCents: number
  /**
   * Worker: the hold sales' expiry sweeper (orders/hold-sweeper.ts; unset = its documented
   * defaults): HOLD_SWEEP_INTERVAL_MS, HOLD_SWEEP_LOCK_TTL_MS, HOLD_SWEEP_BATCH,
   * HOLD_SWEEP_MAX_BATCHES, and HOLD_SWEEP_TEST_PAUSE (`before-write:<ms>` | `before-return:<ms>`,
   * for the fault tests only).
   */
  holdSweep: HoldSweepSettings
}

export interface HoldSweepSettings {
  intervalMs?: number
  lockTtlMs?: number
  batchSize?: number
  maxBatches?: number
  testPause?: { at: 'before-write' | 'before-return'; ms: number }
}

export const DEFAULT_CONFIG = Object.freeze({
  strategy: 'lua',
  durability: 'replica',
  waitTimeoutMs: 50,
  host: '0.0.0.0',
  port: 8080,
  workerPort: 9464,
  maxInflight: 1024,
  maxEventLoopDelayMs: 250,
  localAnswers: true,
  refusalLane: true,
  batchHoldMs: 20,
  lockWaitMs: 250,
  claimIdleMs: 15_000,
  maxDeliveries: 5,
  drainTimeoutMs: 10_000,
  drainDelayMs: 0,
  queueName: 'flash-sale.orders',
  defaultWalletBalanceCents: 0,
} as const)

export class ConfigError extends ServiceError {
  readonly code = 'E_CONFIG'
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`)
  }
}

type Env = Record<string, string | undefined>

export function parseHostPorts(value: string): HostPort[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item) => {
      const i = item.lastIndexOf(':')
      const host = i > 0 ? item.slice(0, i) : ''
      const port = Number(item.slice(i + 1))
      if (!host || !Number.isInteger(port) || port < 1 || port > 65_535) throw new Error(item)
      return { host, port }
    })
}

/**
 * REDIS_TLS=true|false, REDIS_TLS_CA_FILE, REDIS_TLS_CERT_FILE + REDIS_TLS_KEY_FILE. The files are
 * read here, once, so a wrong path is one more line of the problem list rather than a failed
 * connection later; the server's certificate is always verified (there is no switch to skip it).
 */
function readRedisTls(
  get: (name: string) => string | undefined,
  redisUrl: string | undefined,
  problems: string[],
): RedisTls | undefined {
  const flag = get('REDIS_TLS')
  if (flag !== undefined && flag !== 'true' && flag !== 'false') {
    problems.push(`REDIS_TLS=${flag}: expected true or false`)
  }
  const file = (name: string) => {
    const path = get(name)
    if (path === undefined) return undefined
    try {
      return readFileSync(path, 'utf8')
    } catch (err) {
      problems.push(`${name}=${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? err})`)
      return undefined
    }
  }
  const ca = file('REDIS_TLS_CA_FILE')
  const cert = file('REDIS_TLS_CERT_FILE')
  const key = file('REDIS_TLS_KEY_FILE')
  if ((get('REDIS_TLS_CERT_FILE') === undefined) !== (get('REDIS_TLS_KEY_FILE') === undefined)) {
    problems.push('REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together (a client certificate and its key)')
  }
  const anyFile = ['REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE'].some((n) => get(n))
  const secureUrl = redisUrl?.startsWith('rediss://') ?? false
  const on = flag === 'true' || anyFile || secureUrl
  if (flag === 'false' && (anyFile || secureUrl)) {
    problems.push('REDIS_TLS=false, but a REDIS_TLS_*_FILE or a rediss:// REDIS_URL asks for TLS')
  }
  if (on && redisUrl?.startsWith('redis://')) {
    problems.push(`REDIS_URL=${redisUrl}: TLS is on, use rediss://`)
  }
  if (!on) return undefined
  return { ...(ca && { ca }), ...(cert && { cert }), ...(key && { key }) }
}

/**
 * Reads the environment. `overrides` (from CLI flags) win over the environment.
 * Variables: STRATEGY, DURABILITY, WAIT_TIMEOUT_MS, REDIS_CLUSTER_NODES | REDIS_URL, REDLOCK_NODES,
 * REDIS_USERNAME, REDIS_PASSWORD, REDIS_TLS, REDIS_TLS_CA_FILE, REDIS_TLS_CERT_FILE, REDIS_TLS_KEY_FILE, DATABASE_URL, QUEUE_URL, QUEUE_NAME, ADMIN_TOKEN, HOST, PORT, WORKER_PORT,
 * MAX_INFLIGHT, MAX_EVENT_LOOP_DELAY_MS, LOCAL_ANSWERS, REFUSAL_LANE, BATCH_HOLD_MS, LOCK_WAIT_MS, CLAIM_IDLE_MS, MAX_DELIVERIES, DRAIN_TIMEOUT_MS,
 * DRAIN_DELAY_MS, WAITING_ROOM_SECRET, DEFAULT_WALLET_BALANCE, HOLD_SWEEP_*.
 */
export function loadConfig(env: Env = process.env, overrides: Env = {}): ServiceConfig {
  const get = (name: string) => {
    const v = overrides[name] ?? env[name]
    return v === undefined || v === '' ? undefined : v
  }
  const problems: string[] = []
  const int = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const raw = get(name)
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name}=${raw}: expected an integer from ${min} to ${max}`)
      return fallback
    }
    return n
  }
  /** Currency units with at most 2 decimals (`150`, `150.5`, `150.00`) → integer cents. */
  const money = (name: string, fallbackCents: number) => {
    const raw = get(name)
    if (raw === undefined) return fallbackCents
    if (!/^\d{1,10}(\.\d{1,2})?$/.test(raw)) {
      problems.push(
        `${name}=${raw}: expected an amount in currency units, e.g. 150.00 (at most 2 decimals, not negative)`,
      )
      return fallbackCents
    }
    const [whole, frac = ''] = raw.split('.')
    return Number(whole) * 100 + Number(frac.padEnd(2, '0'))
  }
  /** Unset stays undefined (the component's own default applies). */
  const optionalInt = (name: string, min: number, max: number) =>
    get(name) === undefined ? undefined : int(name, min, min, max)
  const holdSweep = (): HoldSweepSettings => {
    const pause = get('HOLD_SWEEP_TEST_PAUSE')
    let testPause: HoldSweepSettings['testPause']
    if (pause !== undefined) {
      const m = /^(before-write|before-return):(\d{1,6})$/.exec(pause)
      if (m) testPause = { at: m[1] as 'before-write' | 'before-return', ms: Number(m[2]) }
      else
        problems.push(
          `HOLD_SWEEP_TEST_PAUSE=${pause}: expected before-write:<ms> or before-return:<ms> (tests only)`,
        )
    }
    return {
      intervalMs: optionalInt('HOLD_SWEEP_INTERVAL_MS', 50, 600_000),
      lockTtlMs: optionalInt('HOLD_SWEEP_LOCK_TTL_MS', 500, 60_000),
      batchSize: optionalInt('HOLD_SWEEP_BATCH', 1, 10_000),
      maxBatches: optionalInt('HOLD_SWEEP_MAX_BATCHES', 1, 10_000),
      testPause,
    }
  }
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const raw = get(name)
    if (raw === undefined) return fallback
    if (!allowed.includes(raw as T)) {
      problems.push(`${name}=${raw}: expected one of ${allowed.join(', ')}`)
      return fallback
    }
    return raw as T
  }
  const hostPorts = (name: string): HostPort[] => {
    const raw = get(name)
    if (raw === undefined) return []
    try {
      return parseHostPorts(raw)
    } catch (err) {
      problems.push(`${name}: "${(err as Error).message}" is not host:port (comma-separated list expected)`)
      return []
    }
  }

  const strategy = oneOf('STRATEGY', ['lua', 'redlock', 'naive'] as const, DEFAULT_CONFIG.strategy)
  const durability = oneOf('DURABILITY', ['replica', 'none'] as const, DEFAULT_CONFIG.durability)
  const clusterNodes = hostPorts('REDIS_CLUSTER_NODES')
  const redisUrl = get('REDIS_URL')
  let redis: ServiceConfig['redis'] = { cluster: clusterNodes }
  if (clusterNodes.length > 0 && redisUrl) {
    problems.push('REDIS_CLUSTER_NODES and REDIS_URL are both set: choose the cluster or one standalone node')
  } else if (redisUrl) {
    if (!/^rediss?:\/\//.test(redisUrl))
      problems.push(`REDIS_URL=${redisUrl}: expected redis://host:port (rediss:// for TLS)`)
    redis = { url: redisUrl }
  } else if (clusterNodes.length === 0 && !get('REDIS_CLUSTER_NODES')) {
    problems.push('REDIS_CLUSTER_NODES (host:port,…) or REDIS_URL is required')
  }
  const redisTls = readRedisTls(get, redisUrl, problems)
  const redlockNodes = hostPorts('REDLOCK_NODES')
  if (strategy === 'redlock' && redlockNodes.length === 0 && !get('REDLOCK_NODES')) {
    problems.push(
      'REDLOCK_NODES is required with STRATEGY=redlock (5 independent Redis masters, host:port,…)',
    )
  } else if (strategy === 'redlock' && redlockNodes.length > 0 && redlockNodes.length < 3) {
    problems.push(`REDLOCK_NODES: ${redlockNodes.length} node(s); Redlock needs at least 3 (5 recommended)`)
  }
  const databaseUrl = get('DATABASE_URL')
  if (!databaseUrl) problems.push('DATABASE_URL is required (postgres://user@host:port/db)')
  else if (!/^postgres(ql)?:\/\//.test(databaseUrl)) problems.push('DATABASE_URL: expected postgres://…')
  const queueUrl = get('QUEUE_URL')
  if (queueUrl && !/^amqps?:\/\//.test(queueUrl)) problems.push(`QUEUE_URL=${queueUrl}: expected amqp://…`)
  const queueName = get('QUEUE_NAME') ?? DEFAULT_CONFIG.queueName
  if (!/^[\w.:-]{1,200}$/.test(queueName))
    problems.push(`QUEUE_NAME=${queueName}: expected 1 to 200 letters, digits, '.', ':', '_' or '-'`)
  const adminToken = get('ADMIN_TOKEN')
  if (!adminToken) problems.push('ADMIN_TOKEN is required (at least 16 characters)')
  else if (adminToken.length < 16) problems.push('ADMIN_TOKEN: too short, use at least 16 random characters')
  const waitingRoomSecret = get('WAITING_ROOM_SECRET')
  if (waitingRoomSecret !== undefined && waitingRoomSecret.length < 32) {
    problems.push(
      'WAITING_ROOM_SECRET: too short, use at least 32 random characters (the same on every instance)',
    )
  }

  const config: ServiceConfig = {
    strategy,
    durability,
    waitTimeoutMs: int('WAIT_TIMEOUT_MS', DEFAULT_CONFIG.waitTimeoutMs, 1, 10_000),
    redis,
    redlockNodes,
    redisUsername: get('REDIS_USERNAME'),
    redisPassword: get('REDIS_PASSWORD'),
    redisTls,
    databaseUrl: databaseUrl ?? '',
    queueUrl,
    queueName,
    adminToken: adminToken ?? '',
    waitingRoomSecret,
    host: get('HOST') ?? DEFAULT_CONFIG.host,
    port: int('PORT', DEFAULT_CONFIG.port, 0, 65_535),
    workerPort: int('WORKER_PORT', DEFAULT_CONFIG.workerPort, 0, 65_535),
    maxInflight: int('MAX_INFLIGHT', DEFAULT_CONFIG.maxInflight, 1),
    maxEventLoopDelayMs: int('MAX_EVENT_LOOP_DELAY_MS', DEFAULT_CONFIG.maxEventLoopDelayMs, 10),
    localAnswers: oneOf('LOCAL_ANSWERS', ['true', 'false'] as const, 'true') === 'true',
    refusalLane: oneOf('REFUSAL_LANE', ['true', 'false'] as const, 'true') === 'true',
    batchHoldMs: int('BATCH_HOLD_MS', DEFAULT_CONFIG.batchHoldMs, 0, 1_000),
    lockWaitMs: int('LOCK_WAIT_MS', DEFAULT_CONFIG.lockWaitMs, 0, 60_000),
    claimIdleMs: int('CLAIM_IDLE_MS', DEFAULT_CONFIG.claimIdleMs, 100),
    maxDeliveries: int('MAX_DELIVERIES', DEFAULT_CONFIG.maxDeliveries, 1, 1000),
    drainTimeoutMs: int('DRAIN_TIMEOUT_MS', DEFAULT_CONFIG.drainTimeoutMs, 0, 600_000),
    drainDelayMs: int('DRAIN_DELAY_MS', DEFAULT_CONFIG.drainDelayMs, 0, 600_000),
    defaultWalletBalanceCents: money('DEFAULT_WALLET_BALANCE', DEFAULT_CONFIG.defaultWalletBalanceCents),
    holdSweep: holdSweep(),
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return config
}
