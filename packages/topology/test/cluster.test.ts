import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RedisCluster, type RedisNode, startCluster, until } from '../src/index.js'

const PASSWORD = 'cluster-pw'

// One cluster for the file: each step builds on the topology the previous one left.
describe('startCluster', () => {
  let cluster: RedisCluster
  let client: Cluster

  beforeAll(async () => {
    cluster = await startCluster({ password: PASSWORD })
    client = new Cluster(cluster.startupNodes, {
      redisOptions: { password: PASSWORD },
      slotsRefreshTimeout: 2_000,
    })
    client.on('error', () => {})
  })
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  it('comes up with 3 masters, one replica each, and all slots served', async () => {
    await cluster.waitForOk()
    expect(cluster.nodes).toHaveLength(6)
    expect(cluster.startupNodes).toHaveLength(6)
    const masters = await cluster.masters()
    expect(masters).toHaveLength(3)
    for (const master of masters) {
      const replica = await cluster.replicaOf(master)
      expect(replica).toBeDefined()
      expect(masters).not.toContain(replica)
    }
    const direct = new Redis({ host: '127.0.0.1', port: masters[0]!.port, password: PASSWORD })
    try {
      const info = await direct.cluster('INFO')
      expect(info).toContain('cluster_state:ok')
      expect(info).toContain('cluster_slots_assigned:16384')
    } finally {
      direct.disconnect()
    }
  })

  it('stores and reads 100 keys through ioredis Cluster', async () => {
    for (let i = 0; i < 100; i++) await client.set(`k:${i}`, String(i))
    for (let i = 0; i < 100; i++) expect(await client.get(`k:${i}`)).toBe(String(i))
  })

  it('migrateSlot moves a slot with keys while a client keeps using it', async () => {
    const tag = '{migrating}'
    const slot = (await client.cluster('KEYSLOT', tag)) as number
    for (let i = 0; i < 60; i++) await client.set(`${tag}:${i}`, 'v0')
    const from = await cluster.slotOwner(slot)
    const to = (await cluster.masters()).find((m) => m !== from)!

    const errors: unknown[] = []
    let running = true
    let round = 0
    const traffic = (async () => {
      while (running) {
        round++
        const i = round % 60
        try {
          await client.set(`${tag}:${i}`, `v${round}`)
          const value = await client.get(`${tag}:${i}`)
          if (value !== `v${round}`) errors.push(new Error(`read ${value}, wrote v${round}`))
          await client.set(`${tag}:new:${round}`, 'x') // keys born during the migration
        } catch (err) {
          errors.push(err)
        }
      }
    })()
    try {
      await cluster.migrateSlot(slot, to, { keysPerBatch: 5, pauseBetweenBatchesMs: 30 })
      await sleep(100)
    } finally {
      running = false
      await traffic
    }
    expect(errors).toEqual([])
    expect(round).toBeGreaterThan(10)
    expect(await cluster.slotOwner(slot)).toBe(to)
    const direct = new Redis({ host: '127.0.0.1', port: to.port, password: PASSWORD })
    try {
      expect(await direct.cluster('COUNTKEYSINSLOT', slot)).toBeGreaterThanOrEqual(60)
    } finally {
      direct.disconnect()
    }
    for (let i = 0; i < 60; i++) expect(await client.get(`${tag}:${i}`)).toMatch(/^v\d+$/)
  })

  let oldMaster: RedisNode
  let newMaster: RedisNode

  it('failover promotes the replica and reads keep working once ioredis has refreshed', async () => {
    oldMaster = (await cluster.masters())[0]!
    const replica = await cluster.replicaOf(oldMaster)
    newMaster = await cluster.failover(oldMaster)
    expect(newMaster).toBe(replica)
    expect(oldMaster.running).toBe(false)
    const masters = await cluster.masters()
    expect(masters).toContain(newMaster)
    expect(masters).not.toContain(oldMaster)

    const readsAll = async () => {
      try {
        for (let i = 0; i < 100; i++) if ((await client.get(`k:${i}`)) !== String(i)) return false
        return true
      } catch {
        return false
      }
    }
    await until(readsAll, 'reads to succeed on every node', 15_000)
  })

  it('rejoin brings the old master back as a replica of the promoted one', async () => {
    await cluster.rejoin(oldMaster)
    expect(oldMaster.running).toBe(true)
    expect(await cluster.masters()).not.toContain(oldMaster)
    expect(await cluster.replicaOf(newMaster)).toBe(oldMaster)
  })
})
