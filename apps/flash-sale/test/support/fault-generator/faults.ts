import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FaultProxy, NetworkFaults, RedisNode } from '@kunci/topology'
import { Redis } from 'ioredis'
import { keySlot } from 'kunci'
import { eventually } from '../eventually.js'
import { type PartitionDriver, partitionDriver } from '../partition-faults.js'
import type { LocalStack } from '../stack-fixture.js'
import type { FaultPlan } from './generator.js'
import type { FaultRecord } from './history.js'

// The faults the generator draws, each run to its end and undone before the next one starts (so
// that when the load stops, the stack is whole again once the last one returns):
//   kill-worker        kill -9 of the worker, started again after holdMs
//   kill-instance      kill -9 of one of the two serve instances (node:cluster forks another)
//   kill-master        kill -9 of the sale's master; its replica takes over; the old one rejoins
//   stop-replica       SIGSTOP of the sale's replica for holdMs, then SIGCONT
//   client-kill-storm  CLIENT KILL USER <app> on the sale's master every everyMs for holdMs, from
//                      an admin connection (the app's connections, the worker's too, dropped
//                      between a script's run and its reply: issue 37 item 3)
//   partition-a        the sale's master cut off from every other node until its replica is
//                      promoted (partition-faults.ts a; the instances still reach the old master)
//   partition-b        the link between the sale's master and its replica cut for 3 s (no failover)
//   partition-c        as a, and the solo instance cut off from every node but the old master
//   partition-d        the solo instance cut off from the sale's master for 3 s
//   partition-e        as b, then kill -9 of the master while the link is cut (a failover to a
//                      replica that lacks the master's last writes, all answered 202)
//   sql-outage         PostgreSQL refused and every connection to it dropped for holdMs (the
//                      stack's SQL goes through a fault proxy)

export const APP_REDIS_USER = 'flash-sale'
/** The uid the stack's solo instance runs as (partitions c and d cut it off by uid). */
export const SOLO_UID = 65534

export class FaultRunner {
  readonly #stack: LocalStack
  readonly #admins = new Map<RedisNode, Redis>()
  readonly #partitions: PartitionDriver | undefined
  readonly #sqlProxy: FaultProxy | undefined

  constructor(
    stack: LocalStack,
    network: NetworkFaults | undefined,
    nodeTimeoutMs: number,
    sqlProxy?: FaultProxy,
  ) {
    this.#stack = stack
    this.#partitions = network && partitionDriver(stack, network, { nodeTimeoutMs, soloUid: SOLO_UID })
    this.#sqlProxy = sqlProxy
  }

  #admin(node: RedisNode): Redis {
    let c = this.#admins.get(node)
    if (c === undefined) {
      c = new Redis({
        host: node.host,
        port: node.port,
        username: this.#stack.redisAdmin.username,
        password: this.#stack.redisAdmin.password,
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        connectTimeout: 1_000,
        commandTimeout: 2_000,
        retryStrategy: () => 200,
      })
      c.on('error', () => {})
      this.#admins.set(node, c)
    }
    return c
  }

  /** The serve instances (node:cluster workers of the service's primary) now running. */
  instances(): number[] {
    const pid = this.#stack.service.pid
    if (pid === undefined) return []
    try {
      return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number)
    } catch {
      return []
    }
  }

  async run(plan: FaultPlan, productId: string, pickIndex: number): Promise<FaultRecord> {
    const { stack } = this
    const slot = keySlot(`{sale:${productId}}:stock`)
    const startedAt = Date.now()
    const record = (node: string | undefined, failover: boolean, detail: string): FaultRecord => ({
      kind: plan.kind,
      productId,
      node,
      startedAt,
      endedAt: Date.now(),
      failover,
      detail,
    })
    switch (plan.kind) {
      case 'kill-worker': {
        await stack.worker.kill()
        await sleep(plan.holdMs)
        stack.worker.start()
        await eventually(
          () => fetch(stack.workerMetricsUrl).then((r) => r.ok),
          (ok) => ok,
          { timeoutMs: 60_000, what: 'the worker back after kill -9' },
        )
        return record(undefined, false, `down ${plan.holdMs} ms`)
      }
      case 'kill-instance': {
        const before = this.instances()
        const victim = before[pickIndex % Math.max(1, before.length)]
        if (victim === undefined) return record(undefined, false, 'no instance to kill')
        process.kill(victim, 'SIGKILL')
        await eventually(
          async () => this.instances(),
          (now) => now.length === before.length && !now.includes(victim),
          { timeoutMs: 60_000, what: 'a new serve instance forked' },
        )
        await eventually(
          () => fetch(`${stack.url}/readyz`).then((r) => r.status),
          (s) => s === 200,
          { timeoutMs: 60_000, what: '/readyz after an instance kill' },
        )
        return record(String(victim), false, `pid ${victim}`)
      }
      case 'kill-master': {
        const master = await stack.cluster.slotOwner(slot)
        const promoted = await stack.cluster.failover(master)
        await sleep(plan.holdMs)
        await stack.cluster.rejoin(master)
        return record(master.name, true, `${master.name} killed, ${promoted.name} promoted, rejoined`)
      }
      case 'stop-replica': {
        const master = await stack.cluster.slotOwner(slot)
        const replica = await stack.cluster.replicaOf(master)
        if (replica === undefined) return record(master.name, false, 'no replica')
        replica.pause()
        try {
          await sleep(plan.holdMs)
        } finally {
          replica.resume()
        }
        return record(replica.name, false, `stopped ${plan.holdMs} ms`)
      }
      case 'client-kill-storm': {
        const master = await stack.cluster.slotOwner(slot)
        const admin = this.#admin(master)
        let kills = 0
        let dropped = 0
        const until = Date.now() + plan.holdMs
        while (Date.now() < until) {
          dropped += Number(await admin.call('CLIENT', 'KILL', 'USER', APP_REDIS_USER).catch(() => 0))
          kills++
          await sleep(plan.everyMs)
        }
        return record(
          master.name,
          false,
          `${kills} CLIENT KILLs every ${plan.everyMs} ms, ${dropped} connections`,
        )
      }
      case 'partition-a':
      case 'partition-b':
      case 'partition-c':
      case 'partition-d':
      case 'partition-e': {
        if (!this.#partitions) return record(undefined, false, 'no network faults on this stack')
        const kind = plan.kind.slice('partition-'.length) as 'a' | 'b' | 'c' | 'd' | 'e'
        if ((kind === 'c' || kind === 'd') && !stack.solo)
          return record(undefined, false, 'no solo instance on this stack')
        const f = await this.#partitions.run(kind, productId, slot)
        const what = {
          a: 'cut off from every node',
          b: 'link to its replica cut',
          c: 'cut off from every node, the solo instance from every other node',
          d: 'the solo instance cut off from it',
          e: 'link to its replica cut, then killed',
        }[kind]
        return record(
          f.master,
          f.promotedAt !== undefined,
          `${what}, resynced ${f.resyncedAt - f.healedAt} ms after the heal`,
        )
      }
      case 'sql-outage': {
        const proxy = this.#sqlProxy
        if (!proxy) return record(undefined, false, 'no SQL proxy on this stack')
        proxy.refuse(true)
        proxy.dropConnections()
        await sleep(plan.holdMs)
        proxy.refuse(false)
        return record(undefined, false, `PostgreSQL refused for ${plan.holdMs} ms`)
      }
    }
  }

  get stack(): LocalStack {
    return this.#stack
  }

  /** Every fault undone: the worker and both instances up, each master with a replica in sync, the Cluster ok. */
  async whole(instances: number): Promise<void> {
    const { stack } = this
    if (!stack.worker.running) stack.worker.start()
    if (stack.solo && !stack.solo.running) stack.solo.start()
    await eventually(
      () => fetch(stack.workerMetricsUrl).then((r) => r.ok),
      (ok) => ok,
      { timeoutMs: 60_000, what: 'the worker up' },
    )
    await eventually(
      async () => this.instances().length,
      (n) => n === instances,
      { timeoutMs: 60_000, what: `${instances} serve instances` },
    )
    await stack.cluster.waitForOk(60_000)
    await eventually(
      async () => {
        const masters = await stack.cluster.masters()
        const replicas = await Promise.all(masters.map((m) => stack.cluster.replicaOf(m)))
        return masters.length === 3 && replicas.every((r) => r !== undefined)
      },
      (ok) => ok,
      { timeoutMs: 60_000, what: 'three masters, each with a replica' },
    )
  }

  close(): void {
    this.#partitions?.close()
    for (const c of this.#admins.values()) c.disconnect()
  }
}
