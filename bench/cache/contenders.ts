/**
 * The caches under comparison, behind one tiny interface. Every contender gets its own Redis
 * connection(s) and key prefix, and is configured the way its documentation recommends for the
 * tier being measured.
 */
import KeyvRedis from '@keyv/redis'
import { until } from '@kunci/topology'
import { BentoCache, bentostore } from 'bentocache'
import { memoryDriver } from 'bentocache/drivers/memory'
import { redisDriver } from 'bentocache/drivers/redis'
import { createCache } from 'cache-manager'
import { Cluster, Redis } from 'ioredis'
import { Cluster as Cluster6, Redis as Redis6 } from 'ioredis6'
import { Keyv } from 'keyv'
import { Cache } from 'kunci'

export interface Target {
  readonly kind: 'standalone' | 'cluster'
  readonly nodes: { host: string; port: number }[]
  readonly password?: string
}

export interface Contender {
  getOrSet<T>(key: string, loader: () => Promise<T>): Promise<T>
  close(): Promise<void>
  /** kunci only, for profile.ts: bus drops so far (L1 is cleared and bypassed until the bus is back). */
  readonly counters?: { busDrops: number }
}

export type ContenderName =
  | 'kunci'
  | 'kunci (ioredis 6 copy)'
  | 'kunci+L1'
  | 'kunci+L1 by-ref'
  | 'bentocache'
  | 'bentocache+L1'
  | 'bentocache+L1 by-ref'
  | 'cache-manager'

export const CONTENDERS: readonly ContenderName[] = [
  'kunci',
  'kunci (ioredis 6 copy)',
  'bentocache',
  'cache-manager',
  'kunci+L1',
  'bentocache+L1',
  'kunci+L1 by-ref',
  'bentocache+L1 by-ref',
]

const TTL_MS = 10 * 60_000
const L1_ENTRIES = 10_000

/**
 * The ioredis client given to kunci and to bentocache alike. Auto-pipelining is on for both:
 * node-redis (under cache-manager's Keyv store) pipelines commands issued in the same tick by
 * default, ioredis only with this flag, and without it the comparison would measure the clients.
 */
export function ioredisClient(target: Target): Redis | Cluster {
  return target.kind === 'cluster'
    ? new Cluster(target.nodes, { enableAutoPipelining: true, redisOptions: { password: target.password } })
    : new Redis({ ...target.nodes[0]!, password: target.password, enableAutoPipelining: true })
}

/**
 * The same client from another copy of ioredis (6.0, installed beside the 5.x kunci resolves, as
 * an application's own ioredis would be): kunci must be as fast on it (issue 24).
 */
function otherCopyClient(target: Target): Redis6 | Cluster6 {
  return target.kind === 'cluster'
    ? new Cluster6(target.nodes, { enableAutoPipelining: true, redisOptions: { password: target.password } })
    : new Redis6({ ...target.nodes[0]!, password: target.password, enableAutoPipelining: true })
}

export async function createContender(
  name: ContenderName,
  target: Target,
  prefix: string,
): Promise<Contender> {
  switch (name) {
    case 'kunci':
    case 'kunci (ioredis 6 copy)':
    case 'kunci+L1':
    case 'kunci+L1 by-ref': {
      const client = name === 'kunci (ioredis 6 copy)' ? otherCopyClient(target) : ioredisClient(target)
      const cache = new Cache({
        client,
        prefix,
        defaultTtlMs: TTL_MS,
        l1MaxEntries: name.includes('L1') ? L1_ENTRIES : 0,
        // Both L1s serialise by default (callers never share an object); "by-ref" keeps objects.
        l1Serialize: name !== 'kunci+L1 by-ref',
      })
      if (name.includes('L1')) await until(() => cache.busConnected, 'the cache bus', 10_000)
      const counters = { busDrops: 0 }
      cache.on('bus-drop', () => counters.busDrops++)
      return {
        counters,
        getOrSet: (key, loader) => cache.getOrSet({ key, loader }),
        close: async () => {
          await cache.close()
          client.disconnect()
        },
      }
    }
    case 'bentocache':
    case 'bentocache+L1':
    case 'bentocache+L1 by-ref': {
      const client = ioredisClient(target)
      let store = bentostore()
      if (name !== 'bentocache') {
        store = store.useL1Layer(memoryDriver({ maxItems: L1_ENTRIES, serialize: name === 'bentocache+L1' }))
      }
      store = store.useL2Layer(redisDriver({ connection: client, prefix }))
      const bento = new BentoCache({ default: 'cache', stores: { cache: store } })
      return {
        getOrSet: (key, loader) => bento.getOrSet({ key, factory: loader, ttl: TTL_MS }),
        close: async () => {
          await bento.disconnectAll()
          client.disconnect()
        },
      }
    }
    case 'cache-manager': {
      const store =
        target.kind === 'cluster'
          ? new KeyvRedis({
              rootNodes: target.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` })),
              defaults: { password: target.password },
            })
          : new KeyvRedis({
              url: `redis://${target.nodes[0]!.host}:${target.nodes[0]!.port}`,
              password: target.password,
            })
      const keyv = new Keyv({ store, namespace: prefix })
      const cache = createCache({ stores: [keyv], ttl: TTL_MS })
      return {
        getOrSet: (key, loader) => cache.wrap(key, loader),
        close: async () => {
          await cache.disconnect()
        },
      }
    }
  }
}
