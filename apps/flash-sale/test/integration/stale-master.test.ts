/**
 * Issue 37 item 6: "alone" is not "no replica can be promoted". A sale's master A is killed, its
 * replica B is promoted and, with no replica left, is shown alone, so the service keeps what B
 * alone holds (reservations, returns) as durable. A is restarted with its old data and rejoins
 * as B's replica; before its full sync from B ends, B fails too. If A may be promoted then, the
 * old data wins: what B acknowledged alone is gone while SQL holds it.
 *
 * Redis decides whether a replica may start a failover by how long its link to its master has
 * been down (`cluster-replica-validity-factor` × `cluster-node-timeout` + the ping period). A
 * restarted node that has not completed a sync since its start counts as down since ever: with
 * any factor above 0 (Redis's default is 10, which the manifests set explicitly) it never
 * promotes itself with unsynced data; with 0 it does. The test topology runs 0 (tests kill nodes
 * at will); this test starts its cluster with the manifests' value and shows both.
 *
 * Forced, not raced: B is frozen (SIGSTOP) before A restarts, so A's sync cannot complete.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { type RedisCluster, type RedisNode, startCluster, until } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { saleKeys } from '../../src/redis/keys.js'

const NODE_TIMEOUT_MS = 1_000
/** deploy/src/k8s/redis-cluster.ts sets the same (Redis's default). */
const MANIFESTS_VALIDITY_FACTOR = 10

const clusters: RedisCluster[] = []
const clients: Redis[] = []
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect()
  for (const c of clusters.splice(0)) await c.stop()
})

function connect(cluster: RedisCluster, node: RedisNode): Redis {
  const c = new Redis({
    host: node.host,
    port: node.port,
    username: cluster.username,
    password: cluster.password,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 100,
  })
  c.on('error', () => {})
  clients.push(c)
  return c
}

/** The node's role as it says itself: 'master' or 'slave' (undefined if it does not answer). */
async function role(cluster: RedisCluster, node: RedisNode): Promise<string | undefined> {
  const c = connect(cluster, node)
  try {
    const r = (await c.call('ROLE')) as [string, ...unknown[]]
    return r[0]
  } catch {
    return undefined
  } finally {
    c.disconnect()
  }
}

const log = (node: RedisNode) => {
  try {
    return readFileSync(join(node.dataDir, 'redis.log'), 'utf8')
  } catch {
    return ''
  }
}

/**
 * A killed, B promoted and alone, a key written on B alone, B frozen, A restarted. Returns the
 * nodes once A has either promoted itself or said it will not.
 */
async function staleRejoin(validityFactor: number) {
  const cluster = await startCluster({
    masters: 3,
    replicasPerMaster: 1,
    nodeTimeoutMs: NODE_TIMEOUT_MS,
    adminUser: true,
    aof: 'everysec',
    extraArgs: ['--cluster-replica-validity-factor', String(validityFactor)],
  })
  clusters.push(cluster)
  const k = saleKeys('stale-1')
  const slotOf = async (key: string) =>
    Number(await connect(cluster, cluster.nodes[0]!).call('CLUSTER', 'KEYSLOT', key))
  const a = await cluster.slotOwner(await slotOf(k.stock))
  const onA = connect(cluster, a)
  await onA.set(k.stock, 'old')
  expect(await onA.wait(1, 5_000)).toBe(1)
  // The AOF has it, so A comes back with the old data (everysec: wait for the fsync).
  await onA.call('BGREWRITEAOF')
  await until(
    async () => /aof_rewrite_in_progress:0/.test(await onA.info('persistence')),
    'the AOF rewrite',
    30_000,
  )
  const b = await cluster.failover(a)
  const onB = connect(cluster, b)
  // B has no replica now: what it holds is only on it (the service counts it durable: alone).
  await onB.set(k.stock, 'new')
  expect(await onB.get(k.stock)).toBe('new')

  b.pause()
  await a.restart()
  return { cluster, a, b, key: k.stock }
}

describe('a deposed master that rejoins and is not synced yet (issue 37 item 6)', () => {
  it(`with the manifests' cluster-replica-validity-factor (${MANIFESTS_VALIDITY_FACTOR}) it refuses to be promoted: what the new master held alone is kept`, {
    timeout: 240_000,
  }, async () => {
    const { cluster, a, b, key } = await staleRejoin(MANIFESTS_VALIDITY_FACTOR)
    // A learns it is B's replica, B is flagged failing, and A declines to start an election.
    await until(
      () => /Disconnected from master for longer than allowed/.test(log(a)),
      'A to decline the failover (its log)',
      60_000,
    ).catch((err) => {
      throw new Error(`${(err as Error).message}; A's log ends:\n${log(a).split('\n').slice(-30).join('\n')}`)
    })
    expect(await role(cluster, a)).toBe('slave')
    b.resume()
    // B comes back as the master it was, with its data; A syncs from it.
    await until(async () => (await role(cluster, b)) === 'master', 'B to answer as master', 60_000)
    await cluster.waitForOk(60_000)
    expect(await connect(cluster, b).get(key)).toBe('new')
    // A replica answers reads only after READONLY (else MOVED to its master).
    const onA = connect(cluster, a)
    await until(
      async () =>
        (await onA
          .call('READONLY')
          .then(() => onA.get(key))
          .catch(() => null)) === 'new',
      'A to hold the new data after its sync',
      60_000,
    )
  })

  it('with cluster-replica-validity-factor 0 the unsynced node promotes itself and the old data wins', {
    timeout: 240_000,
  }, async () => {
    const { cluster, a, b, key } = await staleRejoin(0)
    await until(async () => (await role(cluster, a)) === 'master', 'A to promote itself', 60_000)
    const onA = connect(cluster, a)
    await until(async () => (await onA.get(key).catch(() => null)) !== null, 'A to serve the slot', 60_000)
    expect(await onA.get(key)).toBe('old')
    b.resume()
  })
})
