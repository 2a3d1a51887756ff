// The service's public entry, for the tools that drive it (apps/flash-sale-lab: the local stack,
// the demo, the load generator) and their tests. What ships is the CLI, `flash-sale serve | worker
// | migrate | reconcile` (the `./cli` export); this is the little the tools need besides it.
export { type Command, dispatch } from './cli/command.js'
export type { Durability, Strategy } from './config.js'
export { connectDb, type Db } from './db/database.js'
export { migrate } from './db/migrate.js'
export { createServiceMetrics } from './metrics/service-metrics.js'
export { APP_ACL_RULES, aclUserArgs } from './redis/acl.js'
export { saleKeys } from './redis/keys.js'
export { type TicketClaims, TicketSigner } from './waiting-room/ticket.js'
