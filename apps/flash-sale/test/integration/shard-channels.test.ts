/**
 * redis/shard-channels.ts on a real 3+3 Cluster: a sale's channel follows its slot through a
 * manual failover (the old master pushes SUNSUBSCRIBE unasked), a slot migration and a kill -9 of
 * the master, and a connection it stops using keeps its error listener, so a reply that arrives
 * late is never an unhandled 'error'. Beside it, the peer behaviour that made us write it:
 * ioredis' own sharded subscribers drop every listener of a subscriber they stop (partition-crowd
 * saw the process die of "Command queue state error ... sunsubscribe" after a heal).
 */
import { type RedisCluster, type RedisNode, startCluster } from '@kunci/topology'
import { Cluster, Redis } from 'ioredis'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { connectSaleRedis, type RedisClient, saleChannels, whenReady } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { ShardChannels } from '../../src/redis/shard-channels.js'
import { eventually } from '../support/eventually.js'

const PASSWORD = 'pw'
const channel = saleKeys('shard-channels-1').events
const slot = keySlot(channel)

let cluster: RedisCluster
let client: RedisClient
let channels: ShardChannels
const received: string[] = []
const config = () => ({
  redis: { cluster: cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })) },
  redisUsername: undefined,
  redisPassword: PASSWORD,
  redisTls: undefined,
})

function admin(node: RedisNode): Redis {
  const c = new Redis({ host: node.host, port: node.port, password: PASSWORD, lazyConnect: true })
  c.on('error', () => {})
  return c
}

/** Publishes until the subscriber hears it: a notification sent while the channel moves is lost by design. */
async function heard(tag: string): Promise<void> {
  let n = 0
  await eventually(
    async () => {
      const message = `${tag} ${n++}`
      await client.call('SPUBLISH', channel, message)
      await new Promise((r) => setTimeout(r, 50))
      return received.some((m) => m.startsWith(`${tag} `))
    },
    (ok) => ok,
    { timeoutMs: 30_000, intervalMs: 100, what: `a notification "${tag}" delivered` },
  )
}

/** CLUSTER FAILOVER on the master's replica: the old master becomes its replica and drops the slot's subscribers. */
async function manualFailover(master: RedisNode): Promise<RedisNode> {
  const replica = await cluster.replicaOf(master)
  if (replica === undefined) throw new Error('the master has no live replica')
  const conn = admin(replica)
  try {
    await conn.call('CLUSTER', 'FAILOVER')
    await eventually(
      () => conn.info('replication'),
      (info) => /role:master/.test(info),
      { timeoutMs: 30_000, what: 'the replica promoted by CLUSTER FAILOVER' },
    )
  } finally {
    conn.disconnect()
  }
  await cluster.waitForOk()
  // The promoted node knows at once; the node slotOwner() asks learns it by gossip a moment later
  // (a CPU-bound neighbour made that moment visible: the old owner was still shown).
  await eventually(
    () => cluster.slotOwner(slot),
    (owner) => owner.port === replica.port,
    { timeoutMs: 30_000, what: "the Cluster's view showing the promoted node as the slot's owner" },
  )
  return replica
}

beforeAll(async () => {
  cluster = await startCluster({ password: PASSWORD })
  client = connectSaleRedis(config())
  await whenReady(client, 20_000)
  channels = saleChannels(client, config(), (ch, message) => {
    if (ch === channel) received.push(message)
  })
})

afterAll(async () => {
  channels?.close()
  client?.disconnect()
  await cluster?.stop()
})

describe('ShardChannels', () => {
  it('delivers a sale channel from the master of its slot', async () => {
    channels.subscribe(channel)
    channels.subscribe(channel) // twice is once
    await heard('first')
    expect(channels.stats()).toEqual({ wanted: 1, subscribed: 1, connections: 1, outOfStep: 0 })
  })

  it('follows the slot through CLUSTER FAILOVER (the old master pushes SUNSUBSCRIBE unasked), a migration and a kill -9', async () => {
    const before = await cluster.slotOwner(slot)
    const promoted = await manualFailover(before)
    expect((await cluster.slotOwner(slot)).port).toBe(promoted.port)
    await heard('after-failover')
    // The demoted master's SUNSUBSCRIBE push was read, out of step with any command, and absorbed.
    expect(channels.stats().outOfStep).toBeGreaterThanOrEqual(1)

    const other = (await cluster.masters()).find((m) => m.port !== promoted.port)!
    await cluster.migrateSlot(slot, other)
    await heard('after-migration')

    const killed = await cluster.slotOwner(slot)
    await cluster.failover(killed)
    await heard('after-kill')
    // Back as a replica, so that the next test has a pair to fail over.
    await cluster.rejoin(killed)
    // Once settled, one connection: those to nodes that no longer serve the channel were closed.
    await eventually(
      async () => channels.stats(),
      (s) => s.subscribed === 1 && s.connections === 1,
      { timeoutMs: 10_000, what: 'one subscription on one connection' },
    )
  })
})

describe('a connection that is no longer used', () => {
  const lateReply = () =>
    new Error(
      'Command queue state error. If you can reproduce this, please report it. Last reply: sunsubscribe,x,0',
    )

  it('ours keeps its error listener after it is closed: a late reply is absorbed', async () => {
    const made: Redis[] = []
    const heardHere: string[] = []
    const ours = new ShardChannels({
      route: (s) => (client as Cluster).slots[s]?.[0],
      connect: (node) => {
        const colon = node.lastIndexOf(':')
        const c = new Redis({
          host: node.slice(0, colon),
          port: Number(node.slice(colon + 1)),
          password: PASSWORD,
          retryStrategy: () => null,
        })
        made.push(c)
        return c
      },
      onMessage: (_ch, m) => heardHere.push(m),
    })
    ours.subscribe(channel)
    await eventually(
      async () => {
        await client.call('SPUBLISH', channel, 'ours')
        return heardHere.length
      },
      (n) => n > 0,
      { what: 'the second subscriber hearing the channel' },
    )
    ours.close()
    expect(made.length).toBeGreaterThan(0)
    for (const c of made) {
      expect(c.listenerCount('error')).toBeGreaterThan(0)
      expect(() => c.emit('error', lateReply())).not.toThrow()
    }
  })

  it('peer: ioredis 5.9.2 shardedSubscribers removes every listener of a subscriber it stops after a failover', async () => {
    const peer = new Cluster(config().redis.cluster, {
      redisOptions: { password: PASSWORD },
      shardedSubscribers: true,
    })
    peer.on('error', () => {})
    peer.on('nodeError', () => {})
    try {
      const heardHere: string[] = []
      peer.on('smessage', (_ch: string, m: string) => heardHere.push(m))
      await peer.ssubscribe(channel)
      await eventually(
        async () => {
          await client.call('SPUBLISH', channel, 'peer')
          return heardHere.length
        },
        (n) => n > 0,
        { what: 'ioredis sharded subscriber hearing the channel' },
      )
      // ioredis internals, read only: its subscriber group keyed by node.
      const group = (
        peer as unknown as {
          shardedSubscribers: { shardedSubscribers: Map<string, { getInstance(): Redis | null }> }
        }
      ).shardedSubscribers.shardedSubscribers
      const owner = await cluster.slotOwner(slot)
      const key = [...group.keys()].find((k) => k.endsWith(`:${owner.port}`))
      expect(key).toBeDefined()
      const instance = group.get(key!)!.getInstance()!
      expect(instance.listenerCount('error')).toBeGreaterThan(0)
      await manualFailover(owner)
      await eventually(
        async () => {
          await new Promise<void>((r) => peer.refreshSlotsCache(() => r()))
          return group.has(key!)
        },
        (present) => !present,
        { what: 'ioredis stopping the subscriber of the demoted master' },
      )
      // The stopped connection: no listener left, so a reply it still reads is thrown.
      expect(instance.listenerCount('error')).toBe(0)
      expect(() => instance.emit('error', lateReply())).toThrow(/Command queue state error/)
    } finally {
      peer.disconnect()
    }
  })
})
