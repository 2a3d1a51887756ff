/**
 * The typed-error contract under partitions, packet loss and dropped connections, reproduced
 * with @kunci/topology's fault proxy in front of each of five nodes (first seen in a two-minute
 * run of 3 clients x 16 workers on real partitions):
 *   - a caller queued in its process's local queue while the majority is unreachable is told
 *     E_LOCK_UNAVAILABLE (an outage), not E_LOCK_NOT_ACQUIRED (contention);
 *   - a release that cannot reach a quorum, of a lock nobody else took, is E_LOCK_UNAVAILABLE,
 *     not E_LOCK_LOST: lost needs more than N - quorum nodes proving the token gone;
 *   - an extension restores the key where a lock that landed on exactly a quorum is missing
 *     (when the fence allows), so one node losing it early does not let a second holder in.
 */
import type { Redis } from 'ioredis'
import { LockLostError, LockNotAcquiredError, LockUnavailableError, Redlock } from 'kunci'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, ready, startFixture, until } from '../support/nodes.js'

const PREFIX = 'partitions:'
let fx: Fixture
/** Admin clients, straight to the servers (never through the proxies). */
let admin: Redis[]
const managers: Redlock[] = []
let n = 0
const res = (name: string) => `${name}-${++n}`
const key = (r: string) => `${PREFIX}{${r}}`

async function manager(nodeTimeoutMs = 300): Promise<Redlock> {
  const clients = fx.clients()
  await ready(clients)
  const m = new Redlock({ clients, prefix: PREFIX, quarantine: false, nodeTimeoutMs, onWarning: () => {} })
  managers.push(m)
  return m
}

const proxies = () => fx.set.nodes.map((node) => node.proxy!)

/**
 * A lock on exactly nodes 0-2, as after a partition that cut off 3 and 4 when it was granted.
 * acquire() returns once a quorum granted: wait for the last grants before removing them, or a
 * grant still in flight would land after the delete.
 */
async function onNodes012(m: Redlock, r: string) {
  const lock = await m.acquire(r, { ttlMs: 10_000 })
  await until(
    async () => (await Promise.all(admin.map((a) => a.get(key(r))))).every((v) => v === lock.token),
    'the lock on every node',
  )
  await Promise.all([admin[3]!.del(key(r)), admin[4]!.del(key(r))])
  return lock
}

beforeAll(async () => {
  fx = await startFixture({ count: 5 })
  admin = fx.set.nodes.map((node) => fx.clients({ port: node.serverPort })[0]!)
  // fx.clients() makes one client per node; keep only the one aimed at each node's own server.
  await ready(admin)
})
afterEach(async () => {
  for (const m of managers.splice(0)) await m.close()
  for (const p of proxies()) {
    p.reset()
    // Connections that lost bytes behind a blackhole are out of step: start over.
    p.dropConnections()
  }
})
afterAll(async () => {
  for (const m of managers) await m.close()
  await fx?.stop()
})

describe('a caller in the local queue while the majority is unreachable', () => {
  it('is rejected with E_LOCK_UNAVAILABLE, like the caller in front of it that talked to Redis', async () => {
    const m = await manager()
    const r = res('queued')
    for (const p of proxies().slice(2)) p.blackhole(true)
    // The first caller talks to the nodes; its attempt runs nodeTimeoutMs (300) past a 150 ms
    // deadline. The second one waits behind it in this process's queue.
    const opts = { retryCount: 3, retryDelayMs: 10, acquireTimeoutMs: 150 }
    const [front, queued] = await Promise.allSettled([m.acquire(r, opts), m.acquire(r, opts)])
    expect(front.status).toBe('rejected')
    expect((front as PromiseRejectedResult).reason).toBeInstanceOf(LockUnavailableError)
    expect(queued.status).toBe('rejected')
    const err = (queued as PromiseRejectedResult).reason
    expect(err).toBeInstanceOf(LockUnavailableError)
    // The votes of the attempt that talked to Redis: three nodes out of reach.
    const votes = (err as LockUnavailableError).votes
    expect(votes.filter((v) => v.status === 'timeout')).toHaveLength(3)
  })

  it('still gets E_LOCK_NOT_ACQUIRED when the caller in front of it met a holder', async () => {
    const m = await manager()
    const holder = await manager()
    const r = res('held')
    const lock = await holder.acquire(r, { ttlMs: 5000 })
    const opts = { retryCount: 3, retryDelayMs: 10, acquireTimeoutMs: 150 }
    const [front, queued] = await Promise.allSettled([m.acquire(r, opts), m.acquire(r, opts)])
    expect((front as PromiseRejectedResult).reason).toBeInstanceOf(LockNotAcquiredError)
    expect((queued as PromiseRejectedResult).reason).toBeInstanceOf(LockNotAcquiredError)
    await lock.release()
  })
})

describe('release of a lock on exactly a quorum, two of its nodes timing out', () => {
  it('is E_LOCK_UNAVAILABLE (not proven lost), under packet loss', async () => {
    const m = await manager()
    const r = res('release')
    const lock = await onNodes012(m, r)
    // Heavy packet loss on nodes 1 and 2: their release arrives after the node time-out.
    for (const p of proxies().slice(1, 3)) p.setPacketLoss(1, 1000)
    const err = await lock.release().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(LockUnavailableError)
    expect(err).not.toBeInstanceOf(LockLostError)
    // The late releases still land: the lock is gone everywhere once the loss passes.
    await until(
      async () => (await Promise.all(admin.map((a) => a.exists(key(r))))).every((x) => x === 0),
      'the delayed releases to land',
    )
  })

  it('is E_LOCK_LOST when more than N - quorum nodes prove the token gone', async () => {
    const m = await manager()
    const r = res('lost')
    const lock = await onNodes012(m, r)
    await admin[2]!.del(key(r))
    await expect(lock.release()).rejects.toBeInstanceOf(LockLostError)
  })

  it('after dropped connections (TCP resets) the release still succeeds on a quorum', async () => {
    const m = await manager()
    const r = res('reset')
    const lock = await m.acquire(r, { ttlMs: 10_000 })
    for (const p of proxies().slice(0, 2)) p.dropConnections()
    await lock.release()
    await until(
      async () => (await Promise.all(admin.map((a) => a.exists(key(r))))).every((x) => x === 0),
      'the lock to be gone from every node',
    )
  })
})

describe('extending a lock that landed on exactly a quorum', () => {
  it('sets the key where it is missing, so one node losing it cannot let a second holder in', async () => {
    const m = await manager()
    const other = await manager()
    const r = res('extend')
    // Just after a partition healed: the lock is on nodes 0-2 only.
    const lock = await onNodes012(m, r)
    await lock.extend(10_000)
    // extend() returns once a quorum extended; the last nodes answer when they do.
    const values = () => Promise.all(admin.map((a) => a.get(key(r))))
    await until(async () => (await values()).every((v) => v === lock.token), 'the key on every node')
    for (const a of admin) expect(await a.pttl(key(r))).toBeGreaterThan(8000)
    // One node's clock steps forward and its copy expires early.
    await admin[0]!.del(key(r))
    await expect(other.acquire(r, { retryCount: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError)
    await lock.release()
  })

  it('does not set it where a later holder was granted (the fence is above ours)', async () => {
    const m = await manager()
    const r = res('fenced')
    const lock = await onNodes012(m, r)
    // Node 4 granted a later holder since (its fence is above ours), who already released.
    await admin[4]!.set(`${key(r)}:fence`, String(lock.fence + 1000))
    await lock.extend(10_000)
    const values = () => Promise.all(admin.map((a) => a.get(key(r))))
    await until(async () => (await values())[3] === lock.token, 'the key back on node 3')
    // Node 4 answered too (extend() waits for a quorum only): it refused, and stays without it.
    expect(await values()).toEqual([lock.token, lock.token, lock.token, lock.token, null])
    expect(await admin[3]!.get(`${key(r)}:fence`)).toBe(String(lock.fence))
    await lock.release()
  })
})
