/**
 * redis/replica-acks.ts on a real 3+3 Cluster: one WAIT round in flight per master, shared by
 * every caller that arrives meanwhile, on a connection of its own; a master without a replica
 * answers "unconfirmed" at once, and "alone" once the Cluster's majority flags its replica failed;
 * a replica that comes back is noticed by the next probe.
 */
import { type RedisCluster, startCluster } from '@kunci/topology'
import { Redis } from 'ioredis'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ackRoute, connectSaleRedis, type RedisClient, whenReady } from '../../src/redis/connect.js'
import { saleKeys } from '../../src/redis/keys.js'
import { type AckOutcome, ReplicaAcks } from '../../src/redis/replica-acks.js'
import { eventually } from '../support/eventually.js'

// WAIT's timeout. The "at once" checks below allow half of it: a caller that waited for a WAIT
// takes the whole of it, and at 1 s half leaves room for a stall of this process (at 200 ms, a
// 100 ms bound did not).
const TIMEOUT_MS = 1_000
const PROBE_MS = 500

let cluster: RedisCluster
let client: RedisClient
let acks: ReplicaAcks
const outcomes: AckOutcome[] = []
const mark = saleKeys('acks-1').ackMark

async function waitCalls(port: number): Promise<number> {
  const admin = new Redis({ port, password: 'pw', lazyConnect: true })
  try {
    const info = await admin.info('commandstats')
    return Number(info.match(/cmdstat_wait:calls=(\d+)/)?.[1] ?? 0)
  } finally {
    admin.disconnect()
  }
}

beforeAll(async () => {
  cluster = await startCluster({ password: 'pw' })
  const config = {
    redis: { cluster: cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })) },
    redisUsername: undefined,
    redisPassword: 'pw',
    redisTls: undefined,
  }
  client = connectSaleRedis(config)
  await whenReady(client, 20_000)
  acks = new ReplicaAcks(ackRoute(client, config), {
    timeoutMs: TIMEOUT_MS,
    probeIntervalMs: PROBE_MS,
    onOutcome: (o) => outcomes.push(o),
  })
  // The slot table must know the sale's slot before routing.
  await client.set(mark, '1')
})

afterAll(async () => {
  acks?.close()
  client?.disconnect()
  await cluster?.stop()
})

describe('ReplicaAcks', () => {
  it('500 concurrent callers with a replica: all confirmed, in a handful of WAIT rounds', async () => {
    const master = await cluster.slotOwner(keySlot(mark))
    const before = await waitCalls(master.port)
    const confirmed = await Promise.all(Array.from({ length: 500 }, () => acks.confirm(mark)))
    expect(confirmed.every(Boolean)).toBe(true)
    const rounds = (await waitCalls(master.port)) - before
    // One round for the first caller, one shared by everyone who came while it was out.
    expect(rounds).toBeGreaterThanOrEqual(1)
    expect(rounds).toBeLessThanOrEqual(3)
  })

  it('the replica killed: one round times out, then every caller is answered unconfirmed at once', async () => {
    const master = await cluster.slotOwner(keySlot(mark))
    const replica = await cluster.replicaOf(master)
    await replica!.kill()
    // The master notices the lost replica link; until then WAIT may still count it.
    await eventually(
      () => acks.confirm(mark),
      (acked) => acked === false,
      { timeoutMs: 20_000, what: 'a WAIT round without the replica' },
    )
    const before = await waitCalls(master.port)
    const started = performance.now()
    const answers = await Promise.all(Array.from({ length: 200 }, () => acks.confirm(mark)))
    const ms = performance.now() - started
    expect(answers.every((a) => a === false)).toBe(true)
    // No caller waited for a WAIT that could not succeed.
    expect(ms).toBeLessThan(TIMEOUT_MS / 2)
    // Not shown (no_replica) until the majority has flagged the dead replica failed, then alone.
    expect(['no_replica', 'alone']).toContain(outcomes.at(-1))
    // The shared connection was never blocked: a read answers at once while probes run.
    const read = performance.now()
    await client.get(mark)
    expect(performance.now() - read).toBeLessThan(TIMEOUT_MS / 2)
    // At most one probe round per interval went out meanwhile.
    expect((await waitCalls(master.port)) - before).toBeLessThanOrEqual(1)

    // The Cluster's view, not the WAIT, decides "alone": once a majority of the masters flags the
    // dead replica `fail`, the probe rounds' alone check (cluster-alone.ts) says so.
    await eventually(
      () => acks.confirmOutcome(mark),
      (o) => o === 'alone',
      { timeoutMs: 30_000, intervalMs: 100, what: 'the master shown alone once its replica is flagged fail' },
    )
    const aloneAt = performance.now()
    expect(await Promise.all(Array.from({ length: 50 }, () => acks.confirmOutcome(mark)))).toEqual(
      Array.from({ length: 50 }, () => 'alone'),
    )
    expect(performance.now() - aloneAt).toBeLessThan(TIMEOUT_MS / 2)

    await replica!.restart()
    // The replica resyncs; a probe (every PROBE_MS) sees it, and callers wait for rounds again.
    await eventually(
      () => acks.confirm(mark),
      (acked) => acked,
      { timeoutMs: 30_000, intervalMs: 50, what: 'a confirmed round after the replica came back' },
    )
    expect(outcomes.at(-1)).toBe('acked')
  })
})
