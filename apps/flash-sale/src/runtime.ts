import { Cache, Redlock } from 'kunci'
import { collectDefaultMetrics, Registry } from 'prom-client'
import type { AppDeps } from './app-deps.js'
import type { ServiceConfig } from './config.js'
import { connectDb, type Db } from './db/database.js'
import { bridgeKunciMetrics } from './metrics/kunci-bridge.js'
import { createServiceMetrics, type ServiceMetrics } from './metrics/service-metrics.js'
import { OrderStore } from './orders/order-store.js'
import { OrderPayments } from './orders/payments.js'
import { UnitReturns } from './orders/unit-returns.js'
import {
  ackRoute,
  connectLockNodes,
  connectSaleRedis,
  type RedisClient,
  saleChannels,
  whenReady,
} from './redis/connect.js'
import { CACHE_PREFIX } from './redis/keys.js'
import { ReplicaAcks } from './redis/replica-acks.js'
import { withTimeout } from './runtime-timeout.js'
import { Catalog } from './sale/catalog.js'
import { Restocks } from './sale/restocks.js'
import { SaleEvents, saleOfChannel } from './sale/sale-events.js'
import { SaleSnapshots } from './sale/sale-snapshots.js'
import { SaleStore } from './sale/sale-store.js'
import { SlotWatch } from './sale/slot-watch.js'
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
function cached<T>(check: () => Promise<T>, failed: T, ttlMs = 1_000): () => Promise<T> {
  let at = 0
  let last: Promise<T> = Promise.resolve(failed)
  return () => {
    if (Date.now() - at > ttlMs) {
      at = Date.now()
      last = check().catch(() => failed)
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
  const orders = new OrderStore(db, {
    defaultWalletCents: config.defaultWalletBalanceCents,
    onCharge: (result, units) => metrics.payments.inc({ result }, units),
  })
  const acks =
    config.strategy === 'lua' && config.durability === 'replica'
      ? new ReplicaAcks(ackRoute(redis, config), {
          timeoutMs: config.waitTimeoutMs,
          onOutcome: (outcome) => metrics.replicaAcks.inc({ outcome }),
        })
      : undefined
  // Every strategy watches the sales' slots (the gauge); only lua and naive reserve there, so
  // only their readiness depends on it.
  const watch = new SlotWatch(redis, {
    onProbed: (seconds) => {
      for (const [product_id, s] of seconds) metrics.saleStoreUnreachable.set({ product_id }, s)
    },
  })
  watch.start()
  const store = new SaleStore(redis, {
    acks,
    watch,
    onBatch: (kind, size) => metrics.reserveBatchSize.observe({ kind }, size),
    holdWhileInFlightMs: config.batchHoldMs,
  })
  // lua: a sold-out sale's refusals from memory (sale/sale-snapshots.ts), told of every change
  // on the sale's own sharded channel (sale/sale-events.ts).
  let events: SaleEvents | undefined
  const snapshots =
    config.strategy === 'lua' && config.localAnswers
      ? new SaleSnapshots(store, {
          onLocalAnswer: (code) => metrics.localAnswers.inc({ code }),
          onResync: (product_id) => metrics.saleResyncs.inc({ product_id }),
          onEpoch: (product_id, epoch) => {
            metrics.saleEpoch.set({ product_id }, epoch)
            // At 0 from the first sight of the sale, so that its alert's increase() works.
            metrics.saleResyncs.inc({ product_id }, 0)
            events?.watch(product_id)
          },
        })
      : undefined
  if (snapshots) {
    events = new SaleEvents(
      saleChannels(redis, config, (channel, message) => {
        const productId = saleOfChannel(channel)
        if (productId === undefined) return
        metrics.saleNotifications.inc({ kind: message.split(' ')[0] ?? '' })
        snapshots.notify(productId, message)
      }),
    )
    snapshots.start()
  }
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
    strategy = new RedlockStrategy(orders, locks, { lockWaitMs: config.lockWaitMs })
  } else if (config.strategy === 'naive') {
    strategy = new NaiveStrategy(store)
  } else {
    strategy = new LuaStrategy(store, {
      durability: config.durability,
      snapshots,
      holdsUnit: (orderId) => orders.holdsUnit(orderId),
      saleInSql: async (productId) => (await orders.sale(productId)) !== undefined,
    })
  }
  const waitingRoom = new WaitingRoom(
    new RoomStore(redis, acks),
    config.waitingRoomSecret === undefined ? undefined : new TicketSigner(config.waitingRoomSecret),
    metrics.waitingRoom,
    config.strategy !== 'redlock',
  )
  // Ready = able to answer checkouts. lua and naive need only the sales' slots (the watch's last
  // contact): their checkouts never touch SQL, and "SQL down, checkouts go on from Redis" is a
  // guarantee that a readiness check on SQL would undo by taking every instance out of the load
  // balancer. redlock runs each checkout in SQL, so it needs SQL too. With no sale to watch yet,
  // any Redis node answering will do.
  const unready = cached(async (): Promise<string | undefined> => {
    const redisDown =
      config.strategy !== 'redlock' && watch.hasSales()
        ? Promise.resolve(watch.reachable() ? undefined : "a sale's Redis slot is unreachable")
        : withTimeout(redis.ping(), 1_000).then(
            () => undefined,
            () => 'Redis is unreachable',
          )
    const sqlDown =
      config.strategy !== 'redlock'
        ? undefined
        : withTimeout(db.query('SELECT 1'), 1_000).then(
            () => undefined,
            () => 'SQL is unreachable',
          )
    const reasons = (await Promise.all([redisDown, sqlDown])).filter((r) => r !== undefined)
    return reasons.length === 0 ? undefined : reasons.join('; ')
  }, 'readiness check failed')
  // Pay and cancel of held orders; a cancel's unit goes back through the one return path.
  const payments = new OrderPayments({
    db,
    store,
    returns: new UnitReturns({
      db,
      store,
      acks,
      onReturned: (product_id, reason, units) => metrics.unitsReturned.inc({ product_id, reason }, units),
    }),
    defaultWalletBalanceCents: config.defaultWalletBalanceCents,
    onCharge: (result) => metrics.payments.inc({ result }),
    onExpired: (product_id, n) => metrics.ordersExpired.inc({ product_id }, n),
  })
  const deps: AppDeps = {
    strategy,
    store,
    db,
    orders,
    payments,
    restocks: new Restocks({ db, store, acks }),
    catalog,
    registry,
    metrics,
    waitingRoom,
    adminToken: config.adminToken,
    maxInflight: config.maxInflight,
    maxEventLoopDelayMs: config.maxEventLoopDelayMs,
    // Only where there are answers from memory to give.
    refusalLane: config.refusalLane && strategy.answerFromMemory !== undefined && config.localAnswers,
    unready,
  }
  return {
    deps,
    redis,
    db,
    registry,
    metrics,
    async close() {
      await strategy.close()
      watch.stop()
      snapshots?.stop()
      events?.close()
      acks?.close()
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
