import type { Registry } from 'prom-client'
import type { Db } from './db/database.js'
import type { ServiceMetrics } from './metrics/service-metrics.js'
import type { OrderPayments } from './orders/payments.js'
import type { Catalog } from './sale/catalog.js'
import type { Restocks } from './sale/restocks.js'
import type { SaleStore } from './sale/sale-store.js'
import type { SqlSaleCountsSource } from './sql/readers.js'
import type { CheckoutStrategy } from './strategies/strategy.js'
import type { WaitingRoom } from './waiting-room/waiting-room.js'

/** Everything the HTTP layer needs, built by server.ts (or a test) and passed to buildApp. */
export interface AppDeps {
  strategy: CheckoutStrategy
  store: SaleStore
  db: Db
  /** What the routes read of the order books: a sale's counts (admin) and the default balance (wallets). */
  orders: SqlSaleCountsSource & { readonly defaultWalletCents: number }
  /** Pay and cancel of held orders (hold sales). */
  payments: OrderPayments
  /** Restocks: SQL first, then Redis once per restock id (sale/restocks.ts). */
  restocks: Restocks
  catalog: Catalog
  registry: Registry
  metrics: ServiceMetrics
  /** Per-sale waiting rooms (off unless a sale has one): queue routes, the checkout's ticket check. */
  waitingRoom: WaitingRoom
  adminToken: string
  /** Checkouts in flight before 429. */
  maxInflight: number
  /** Event-loop delay (ms) above which requests are shed with 503; 0 disables. */
  maxEventLoopDelayMs: number
  /** Answer the strategy's refusals from memory before fastify's routing (routes/refusal-lane.ts). */
  refusalLane: boolean
  /** Undefined when Redis and SQL are reachable, else why not (cached by the caller). */
  unready(): Promise<string | undefined>
}
