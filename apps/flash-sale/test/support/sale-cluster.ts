import { type RedisCluster, type StartClusterOptions, startCluster } from '@kunci/topology'
import type { ClusterOptions } from 'ioredis'
import { connectSaleRedis, type RedisClient, whenReady } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { eventually } from './eventually.js'

/** A real Cluster (password 'pw') and the service's own Redis client settings to reach it. */
export interface SaleCluster {
  cluster: RedisCluster
  /** What connectSaleRedis and ackRoute take. */
  config: {
    redis: { cluster: { host: string; port: number }[] }
    redisUsername: undefined
    redisPassword: string
    redisTls: undefined
  }
  /**
   * A client as the service makes it (connectSaleRedis), ready, and answering on `productId`'s
   * slot when one is given (a slot table read while the Cluster settled can redirect the first
   * calls). `natMap` sends a node's traffic elsewhere (a test's fault proxy).
   */
  connect(options?: {
    name?: string
    natMap?: ClusterOptions['natMap']
    productId?: string
  }): Promise<RedisClient>
}

/** Starts the Cluster (options as startCluster's, password 'pw'); stop it with `cluster.stop()`. */
export async function startSaleCluster(options: StartClusterOptions = {}): Promise<SaleCluster> {
  const cluster = await startCluster({ password: 'pw', ...options })
  const config = {
    redis: { cluster: cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })) },
    redisUsername: undefined,
    redisPassword: 'pw',
    redisTls: undefined,
  }
  return {
    cluster,
    config,
    async connect({ name, natMap, productId } = {}) {
      const client = connectSaleRedis(config, name, natMap)
      await whenReady(client, 20_000)
      if (productId !== undefined)
        await eventually(
          () => client.get(saleKeys(productId).meta).then(() => true),
          (ok) => ok,
          { what: `the slot of sale ${productId} answers` },
        )
      return client
    },
  }
}
