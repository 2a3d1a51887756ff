import { Cluster, Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  distinctHost,
  eventually,
  type RedisCluster,
  type RedisNode,
  startCluster,
  startNodes,
} from '../src/index.js'

/** A client of one node at its own address, logged in as topology's user. */
function direct(node: RedisNode, tls?: { ca: string }): Redis {
  const c = new Redis({
    host: node.host,
    port: node.port,
    username: node.username,
    password: node.password,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    ...(tls && { tls }),
  })
  c.on('error', () => {})
  return c
}

async function withClient<T>(
  node: RedisNode,
  fn: (c: Redis) => Promise<T>,
  tls?: { ca: string },
): Promise<T> {
  const c = direct(node, tls)
  try {
    return await fn(c)
  } finally {
    c.disconnect()
  }
}

describe('distinctHost', () => {
  it('puts the port in the last two octets of 127.1.x.y', () => {
    expect(distinctHost(20_000)).toBe('127.1.78.32')
    expect(distinctHost(29_999)).toBe('127.1.117.47')
    expect(() => distinctHost(0)).toThrow(RangeError)
  })
})

// One cluster for the file, with ACL users (the default user off) as the lab runs it: each step
// builds on the topology the previous one left.
describe('startCluster({ distinctHosts: true })', () => {
  let cluster: RedisCluster
  let client: Cluster

  beforeAll(async () => {
    cluster = await startCluster({ distinctHosts: true, adminUser: true, nodeTimeoutMs: 1_500 })
    client = new Cluster(cluster.startupNodes, {
      redisOptions: { username: cluster.username, password: cluster.password },
      slotsRefreshTimeout: 2_000,
    })
    client.on('error', () => {})
  })
  afterAll(async () => {
    client?.disconnect()
    await cluster?.stop()
  })

  it('gives every node its own loopback address, derived from its port, and announces it', async () => {
    const hosts = cluster.nodes.map((n) => n.host)
    expect(new Set(hosts).size).toBe(6)
    for (const node of cluster.nodes) expect(node.host).toBe(distinctHost(node.serverPort))
    expect(cluster.startupNodes.map((n) => n.host)).toEqual(hosts)
    await withClient(cluster.nodes[0]!, async (c) => {
      const nodes = String(await c.cluster('NODES'))
      for (const node of cluster.nodes) expect(nodes).toContain(`${node.host}:${node.serverPort}@`)
      expect(nodes).not.toContain('127.0.0.1')
      expect(await c.config('GET', 'cluster-node-timeout')).toEqual(['cluster-node-timeout', '1500'])
    })
  })

  it("connects replicas from their own address (CLIENT LIST on the master shows the replica's)", async () => {
    for (const master of await cluster.masters()) {
      const replica = (await cluster.replicaOf(master))!
      const list = await withClient(master, async (c) => String(await c.client('LIST')))
      const replication = list.split('\n').find((line) => / flags=S /.test(line))
      expect(replication).toContain(`addr=${replica.host}:`)
      expect(replication).toContain(`laddr=${master.host}:${master.serverPort}`)
    }
  })

  it('serves ioredis Cluster, and keeps its data across failover(), rejoin(), migrateSlot() and a restart', async () => {
    for (let i = 0; i < 50; i++) await client.set(`k:${i}`, String(i))
    const slot = (await client.cluster('KEYSLOT', 'k:7')) as number
    const master = await cluster.slotOwner(slot)
    const promoted = await cluster.failover(master)
    expect(await cluster.slotOwner(slot)).toBe(promoted)
    await eventually(async () => expect(await client.get('k:7')).toBe('7'), 30_000)
    await cluster.rejoin(master)
    expect(await cluster.replicaOf(promoted)).toBe(master)
    // The rejoined node sends from its own address again.
    const list = await withClient(promoted, async (c) => String(await c.client('LIST')))
    expect(list).toContain(`addr=${master.host}:`)

    // MIGRATE dials the target's own address.
    const to = (await cluster.masters()).find((m) => m !== promoted)!
    await cluster.migrateSlot(slot, to)
    expect(await cluster.slotOwner(slot)).toBe(to)
    await eventually(async () => expect(await client.get('k:7')).toBe('7'), 30_000)

    await master.kill()
    await master.restart()
    await cluster.waitForOk()
    await eventually(async () => {
      for (let i = 0; i < 50; i++) expect(await client.get(`k:${i}`)).toBe(String(i))
    }, 30_000)
  })
})

describe('distinctHosts with TLS', () => {
  it('gives each node a certificate for its own address (clients verify it) in a cluster and a node set', async () => {
    await using cluster = await startCluster({
      distinctHosts: true,
      tls: true,
      masters: 3,
      replicasPerMaster: 1,
    })
    const tls = { ca: cluster.tls!.ca }
    const client = new Cluster(cluster.startupNodes, { redisOptions: { tls }, slotsRefreshTimeout: 2_000 })
    client.on('error', () => {})
    try {
      for (let i = 0; i < 20; i++) await client.set(`t:${i}`, String(i))
      expect(await client.get('t:3')).toBe('3')
    } finally {
      client.disconnect()
    }
    const master = (await cluster.masters())[0]!
    const replica = (await cluster.replicaOf(master))!
    const list = await withClient(master, async (c) => String(await c.client('LIST')), tls)
    expect(list).toContain(`addr=${replica.host}:`)

    await using set = await startNodes({ count: 2, distinctHosts: true, tls: true, proxy: true })
    for (const node of set.nodes) {
      expect(node.host).toBe(distinctHost(node.serverPort))
      // Through the proxy, which listens on the node's address too.
      expect(await withClient(node, (c) => c.ping(), { ca: set.tls!.ca })).toBe('PONG')
    }
    // Killed and restarted empty: the same address, its certificate still there.
    const node = set.nodes[0]!
    await withClient(node, (c) => c.set('x', '1'), { ca: set.tls!.ca })
    await node.kill()
    await node.restart({ empty: true })
    expect(node.host).toBe(distinctHost(node.serverPort))
    expect(await withClient(node, (c) => c.get('x'), { ca: set.tls!.ca })).toBeNull()
  })
})
