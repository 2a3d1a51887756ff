/**
 * The service's own Lua scripts on the Cluster client it really uses (connect.ts: auto-pipelining
 * on). ioredis files an auto-pipelined EVALSHA under the slot of its SHA, not of its keys, so one
 * tick's script calls for sales on two masters shared one pipeline that ioredis refused whole
 * ("All keys in the pipeline should belong to the same slots allocation group"): a worker
 * settling orders of two sales at once failed both. connect.ts keeps scripts out of the
 * auto-pipeline.
 */
import { type RedisCluster, startCluster } from '@kunci/topology'
import { keySlot, Script } from 'kunci'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { connectSaleRedis, type RedisClient, whenReady } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'

const SET_STATUS = Script.fromFile(new URL('../../src/orders/scripts/set-status.lua', import.meta.url))

let cluster: RedisCluster
let client: RedisClient
beforeAll(async () => {
  cluster = await startCluster({ password: 'pw' })
  client = connectSaleRedis({
    redis: { cluster: cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })) },
    redisUsername: undefined,
    redisPassword: 'pw',
    redisTls: undefined,
  })
  await whenReady(client, 20_000)
})
afterAll(async () => {
  client?.disconnect()
  await cluster?.stop()
})

it("runs one tick's scripts for sales on every master, each on its own sale's node", async () => {
  const products = Array.from({ length: 24 }, (_, i) => `p${i}`)
  const masters = new Set(
    await Promise.all(products.map(async (p) => (await cluster.slotOwner(keySlot(saleKeys(p).status))).port)),
  )
  expect(masters.size).toBe(3)
  await Promise.all(products.map((p) => client.hset(saleKeys(p).status, 'o1', 'reserved|u1|1')))
  const replies = await Promise.all(
    products.map((p) => SET_STATUS.run(client, [saleKeys(p).status], ['o1', 'confirmed'])),
  )
  expect(replies).toEqual(products.map(() => 1))
  const stored = await Promise.all(products.map((p) => client.hget(saleKeys(p).status, 'o1')))
  expect(stored).toEqual(products.map(() => 'confirmed|u1|1'))
})
