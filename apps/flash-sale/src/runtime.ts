import { Cache, Redlock } from 'kunci'
import { collectDefaultMetrics, Registry } from 'prom-client'
import type { AppDeps } from './app-deps.js'
import type { ServiceConfig } from './config.js'
import { connectDb, type Db } from './db/database.js'
import { bridgeKunciMetrics } from './metrics/kunci-bridge.js'
import { createServiceMetrics, type ServiceMetrics } from './metrics/service-metrics.js'
import { connectLockNodes, connectSaleRedis, type RedisClient, whenReady } from './redis/connect.js'
import { CACHE_PREFIX } from './redis/keys.js'
import { withTimeout } from './runtime-timeout.js'
import { Catalog } from './sale/catalog.js'
import { SaleStore } from './sale/sale-store.js'
import { LuaStrategy } from './strategies/lua.js'
import { NaiveStrategy } from './strategies/naive.js'
import { RedlockStrategy } from './strategies/redlock.js'
import type { CheckoutStrategy } from './strategies/strategy.js'
import { RoomStore } from './waiting-room/room-store.js'
import { TicketSigner } from './waiting-room/ticket.js'
import { WaitingRoom } from './waiting-room/waiting-room.js'

export interface Runtime {
  deps: AppDeps
  redis: RedisClient
  db: Db
  registry: Registry
  metrics: ServiceMetrics
  close(): Promise<void>
}

/** Caches a check for `ttlMs` so that probes do not add Redis and SQL round trips per call. */
function cached(check: () => Promise<boolean>, ttlMs = 1_000): () => Promise<boolean> {
  let at = 0
  let last: Promise<boolean> = Promise.resolve(false)
  return () => {
    if (Date.now() - at > ttlMs) {
      at = Date.now()
      last = check().catch(() => false)
    }
    return last
  }
}

/** Builds everything a service process needs from its configuration; `close()` undoes it. */
export async function createRuntime(config: ServiceConfig): Promise<Runtime> {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const metrics = createServiceMetrics(registry)
  const bridge = bridgeKunciMetrics({
    registry,
    lockName: 'checkout',
    nodes: config.strategy === 'redlock' ? config.redlockNodes.length : 0,
  })
  const redis = connectSaleRedis(config, 'flash-sale-serve')
  await whenReady(redis)
  const db = connectDb(config.databaseUrl, 20)
  const store = new SaleStore(redis)
  const cache = new Cache({ client: redis, prefix: CACHE_PREFIX, l1MaxEntries: 10_000 })
  const stopCacheMetrics = bridge.observeCache(cache, 'catalog')
  const catalog = new Catalog(cache, db)
  let lockClients: ReturnType<typeof connectLockNodes> = []
  let locks: Redlock | undefined
  let strategy: CheckoutStrategy
  if (config.strategy === 'redlock') {
    lockClients = connectLockNodes(config.redlockNodes, config)
    locks = new Redlock({
      clients: lockClients,
      ttlMs: 5_000,
      maxTtlMs: 5_000,
      nodeTimeoutMs: 200,
      persistence: 'everysec',
    })
    strategy = new RedlockStrategy(db, locks, { lockWaitMs: config.lockWaitMs })
  } else if (config.strategy === 'naive') {
    strategy = new NaiveStrategy(store)
  } else {
    strategy = new LuaStrategy(store, { durability: config.durability, waitTimeoutMs: config.waitTimeoutMs })
  }
  const waitingRoom = new WaitingRoom(
    new RoomStore(redis, {
      replicas: config.durability === 'replica' ? 1 : 0,
      waitTimeoutMs: config.waitTimeoutMs,
    }),
    config.waitingRoomSecret === undefined ? undefined : new TicketSigner(config.waitingRoomSecret),
    metrics.waitingRoom,
    config.strategy !== 'redlock',
  )
  const ready = cached(async () => {
    await withTimeout(Promise.all([redis.ping(), db.query('SELECT 1')]), 1_000)
    return true
  })
  const deps: AppDeps = {
    strategy,
    store,
    db,
    catalog,
    registry,
    metrics,
    waitingRoom,
    adminToken: config.adminToken,
    maxInflight: config.maxInflight,
    maxEventLoopDelayMs: config.maxEventLoopDelayMs,
    ready,
  }
  return {
    deps,
    redis,
    db,
    registry,
    metrics,
    async close() {
      await strategy.close()
      stopCacheMetrics()
      await cache.close()
      await locks?.close()
      bridge.close()
      for (const c of lockClients) c.disconnect()
      await db.end().catch(() => {})
      redis.disconnect()
    },
  }
}
