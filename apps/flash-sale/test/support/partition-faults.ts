import { setTimeout as sleep } from 'node:timers/promises'
import { type NetworkFaults, type RedisNode, until } from '@kunci/topology'
import { Redis } from 'ioredis'
import type { LocalStack } from './stack-fixture.js'

// The five partitions of issue 20, each applied to the master that serves the current sale, then
// healed, and the Cluster brought back to 3 masters with a replica each before the next one.
//   a  the sale's master cut off from every other node (both instances still reach it)
//   b  only the link between the sale's master and its replica cut
//   c  as a, and the solo instance also cut off from every node but the isolated master
//   d  the solo instance cut off from the sale's master only
//   e  as b, then kill -9 of the master while the link is still cut

export type PartitionKind = 'a' | 'b' | 'c' | 'd' | 'e'

/** What one fault did, for the checks (times are Date.now()). */
export interface PartitionFault {
  kind: PartitionKind
  productId: string
  master: string
  startedAt: number
  /** When the replica was seen promoted (a, c, e), undefined when none was (b, d). */
  promotedAt: number | undefined
  healedAt: number
  /** When the master and its replica were in sync again (a replica's full sync after a restart). */
  resyncedAt: number
  /**
   * When a write in the sale's slot was first acknowledged by a replica again (the test's own
   * SET + WAIT on the slot's master, as the service's confirmation round does). Until then the
   * service cannot show an answer is kept and answers 503 on purpose; a replica whose link is up
   * may still take seconds to acknowledge on a loaded machine.
   */
  confirmedAt: number
  /** When the Cluster was whole again (every master with a replica in sync). */
  recoveredAt: number
}

/** Kinds after which a failover takes writes back: only there may a 202 be lost. */
export const FAILOVER_KINDS: ReadonlySet<PartitionKind> = new Set(['a', 'c', 'e'])

export interface PartitionDriver {
  run(kind: PartitionKind, productId: string, slot: number): Promise<PartitionFault>
  close(): void
}

export function partitionDriver(
  stack: LocalStack,
  faults: NetworkFaults,
  options: { nodeTimeoutMs: number; soloUid: number },
): PartitionDriver {
  const admins = new Map<RedisNode, Redis>()
  const admin = (node: RedisNode) => {
    let c = admins.get(node)
    if (c === undefined) {
      c = new Redis({
        host: node.host,
        port: node.port,
        username: stack.redisAdmin.username,
        password: stack.redisAdmin.password,
        lazyConnect: true,
        enableOfflineQueue: true,
        maxRetriesPerRequest: 1,
        connectTimeout: 1_000,
        commandTimeout: 1_000,
        retryStrategy: () => 200,
      })
      c.on('error', () => {})
      admins.set(node, c)
    }
    return c
  }
  /** The node's own idea of its role and link, or undefined if it does not answer. */
  const replication = async (node: RedisNode) => {
    const info = await admin(node)
      .info('replication')
      .catch(() => '')
    if (info === '') return undefined
    return { role: /role:(\w+)/.exec(info)?.[1], linkUp: /master_link_status:up/.test(info) }
  }
  // A failover takes cluster-node-timeout to notice, then an election: budget generously.
  const failoverMs = options.nodeTimeoutMs * 4 + 30_000
  const promoted = (replica: RedisNode, what: string) =>
    until(async () => (await replication(replica))?.role === 'master', what, {
      timeoutMs: failoverMs,
      intervalMs: 50,
    })
  /**
   * Whole again: the old master a replica of the promoted one (or of itself again), in sync, the
   * Cluster ok. Resolves with when the pair was first seen in sync and when a write to `probeKey`
   * (a key in the sale's slot) was first acknowledged by the replica.
   */
  const recovered = async (
    master: RedisNode,
    replica: RedisNode,
    probeKey: string,
  ): Promise<{ resyncedAt: number; confirmedAt: number }> => {
    await until(
      async () => {
        const [m, r] = await Promise.all([replication(master), replication(replica)])
        if (m === undefined || r === undefined) return false
        return (
          (m.role === 'master' && r.role === 'slave' && r.linkUp) ||
          (r.role === 'master' && m.role === 'slave' && m.linkUp)
        )
      },
      'the master and its replica in sync again',
      { timeoutMs: 60_000 + options.nodeTimeoutMs * 4, intervalMs: 100 },
    )
    const resyncedAt = Date.now()
    // The service's confirmation round is SET of a marker + WAIT for one replica: the same here,
    // on whichever of the two is master now (a node that does not answer yet is asked again).
    await until(
      async () => {
        const owner = (await replication(master))?.role === 'master' ? master : replica
        const [[setErr], [waitErr, acks]] = ((await admin(owner)
          .pipeline()
          .set(probeKey, '1', 'PX', 10_000)
          .wait(1, 500)
          .exec()
          .catch(() => null)) ?? [[new Error('no reply')], [new Error('no reply'), 0]]) as [
          [Error | null],
          [Error | null, unknown],
        ]
        return setErr === null && waitErr === null && Number(acks) >= 1
      },
      "a write in the sale's slot acknowledged by the replica again",
      { timeoutMs: 60_000 + options.nodeTimeoutMs * 4, intervalMs: 100 },
    )
    const confirmedAt = Date.now()
    // And the Cluster's view says so: a node restarted after a kill stays flagged `fail` in the
    // others' tables until gossip clears it (seconds at a 15 s node timeout), and the next fault
    // reads the pair from that view.
    // Every node's view, not one: a voter that still has the pair's former master flagged
    // `fail` refuses the next election (seen: no promotion in 90 s at a 15 s node timeout).
    // A node that does not answer this round (restarted, loading, a command timed out on the busy
    // machine) is not yet a view that shows the pair: asked again at the next round.
    const idOf = async (node: RedisNode) => String(await admin(node).call('CLUSTER', 'MYID'))
    const viewsShowPair = async () => {
      const owner = (await replication(master))?.role === 'master' ? master : replica
      const other = owner === master ? replica : master
      const [ownerId, otherId] = await Promise.all([idOf(owner), idOf(other)])
      for (const node of stack.cluster.nodes) {
        const lines = String(await admin(node).call('CLUSTER', 'NODES')).split('\n')
        const entry = (id: string) => lines.find((l) => l.startsWith(`${id} `))?.split(' ')
        const o = entry(ownerId)
        const r = entry(otherId)
        if (o === undefined || r === undefined) return false
        if (!o[2]!.includes('master') || o[2]!.includes('fail')) return false
        if (!r[2]!.includes('slave') || r[2]!.includes('fail') || r[3] !== ownerId) return false
      }
      return true
    }
    await until(
      () => viewsShowPair().catch(() => false),
      "every node's view shows the master and its replica again",
      { timeoutMs: 60_000 + options.nodeTimeoutMs * 4, intervalMs: 200 },
    )
    await stack.cluster.waitForOk(60_000)
    return { resyncedAt, confirmedAt }
  }

  return {
    async run(kind, productId, slot) {
      const master = await stack.cluster.slotOwner(slot)
      const replica = await stack.cluster.replicaOf(master)
      if (replica === undefined) throw new Error(`no replica of ${master.name} before fault ${kind}`)
      const others = stack.cluster.nodes.filter((n) => n !== master)
      const startedAt = Date.now()
      let promotedAt: number | undefined
      if (kind === 'a' || kind === 'c') {
        await faults.isolate(master, others)
        if (kind === 'c') await faults.cutUid(options.soloUid, others)
        await promoted(replica, `the replica promoted while ${master.name} is cut off (${kind})`)
        promotedAt = Date.now()
        // The isolated master notices it is in the minority and stops taking writes.
        // (Long since, at any node timeout: the promotion itself waited for it.)
        await sleep(1_500)
        await faults.heal()
      } else if (kind === 'b' || kind === 'd') {
        if (kind === 'b') await faults.cut(master, replica)
        else await faults.cutUid(options.soloUid, [master])
        await sleep(3_000)
        await faults.heal()
      } else {
        await faults.cut(master, replica)
        await sleep(1_000)
        await master.kill()
        await promoted(replica, `the replica promoted after ${master.name} was killed while cut off (e)`)
        promotedAt = Date.now()
        await faults.heal()
        await master.restart()
      }
      const healedAt = Date.now()
      const { resyncedAt, confirmedAt } = await recovered(
        master,
        replica,
        `{sale:${productId}}:partition-probe`,
      )
      return {
        kind,
        productId,
        master: master.name,
        startedAt,
        promotedAt,
        healedAt,
        resyncedAt,
        confirmedAt,
        recoveredAt: Date.now(),
      }
    },
    close() {
      for (const c of admins.values()) c.disconnect()
    },
  }
}
