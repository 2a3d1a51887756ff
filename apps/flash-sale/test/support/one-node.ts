import { type NodeSet, startNodes } from '@kunci/topology'
import { connectSaleRedis, type RedisClient, whenReady } from '../../src/redis/connect.js'

/** One real redis-server of the test's own and the service's sale client on it (no replica). */
export interface OneNode {
  nodes: NodeSet
  redis: RedisClient
  /** Disconnects the client and stops the server. */
  stop(): Promise<void>
}

export async function startOneNode(): Promise<OneNode> {
  const nodes = await startNodes({ count: 1, proxy: false })
  const node = nodes.nodes[0]!
  const redis = connectSaleRedis({
    redis: { url: `redis://${node.host}:${node.port}` },
    redisUsername: undefined,
    redisPassword: undefined,
    redisTls: undefined,
  })
  try {
    await whenReady(redis)
  } catch (err) {
    redis.disconnect()
    await nodes.stop()
    throw err
  }
  return {
    nodes,
    redis,
    async stop() {
      redis.disconnect()
      await nodes.stop()
    },
  }
}
