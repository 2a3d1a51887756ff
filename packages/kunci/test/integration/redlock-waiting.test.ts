/**
 * How waiters are woken: the oldest queued manager first, without polling storms, with the
 * client settings recommended for lock nodes, and without marking a lock for callers that will
 * not wait.
 */
import { channel } from 'node:diagnostics_channel'
import type { Redis } from 'ioredis'
import { LockNotAcquiredError, Redlock, type RedlockOptions } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, queuedOn, ready, sleep, startFixture, until } from '../support/nodes.js'

let fx: Fixture
let clients: Redis[]
const managers: Redlock[] = []
beforeAll(async () => {
  fx = await startFixture({ count: 5 })
  clients = fx.clients()
  await ready(clients)
})
afterAll(async () => {
  for (const m of managers) await m.close()
  await fx?.stop()
})

function pod(o: Partial<RedlockOptions> = {}, clientOptions = {}): Redlock {
  const m = new Redlock({ clients: fx.clients(clientOptions), quarantine: false, onWarning: () => {}, ...o })
  managers.push(m)
  return m
}
let n = 0
const res = () => `wait-${++n}`

describe('waking waiters', () => {
  it('wakes queued managers one at a time, oldest first', async () => {
    const holder = pod()
    const r = res()
    const lockKey = `kunci:{${r}}`
    // Generous TTL and retry delays: no waiter's safety-net poll and no expiry can come due
    // while the test sets up (a poll that fires while the lock is free between a release and
    // the woken waiter's attempt may take it first; docs/locks.md, "Not strict FIFO").
    const first = await holder.acquire(r, { ttlMs: 60_000 })
    const order: string[] = []
    // Second attempts that found the lock held: a waiter's second attempt is the re-check its
    // subscription's first confirmation triggers (release-notifier.ts).
    const rechecks: number[] = []
    const onContention = (m: unknown) => {
      const e = m as { resources: readonly string[]; attempt: number }
      if (e.resources[0] === r && e.attempt === 2) rechecks.push(e.attempt)
    }
    channel('kunci:lock:contention').subscribe(onContention)
    try {
      const waiters = ['A', 'B', 'C'].map((name) => ({ name, m: pod() }))
      // New managers check each node (INFO) before their first vote goes out; on a loaded
      // machine a check can time out and that node misses the first attempt, so its queue
      // would lack the waiter. A lock that reached every node shows every link is checked.
      for (const w of waiters) {
        const scratch = await w.m.acquire(res(), { ttlMs: 10_000 })
        await until(
          async () =>
            (await Promise.all(clients.map((c) => c.get(`kunci:{${scratch.resources[0]}}`)))).every(
              (v) => v === scratch.token,
            ),
          `${w.name}'s first lock to reach every node`,
        )
        await scratch.release()
      }
      const done: Promise<void>[] = []
      for (const [i, w] of waiters.entries()) {
        done.push(
          w.m.acquire(r, { ttlMs: 10_000, retryDelayMs: 15_000, retryJitterMs: 0 }).then(async (lock) => {
            order.push(w.name)
            await sleep(20)
            await lock.release()
          }),
        )
        // Each one queues after the previous one on every node, so every node's queue has the
        // same head. Then it must be subscribed on every node and have made the re-check its
        // subscription triggers: that re-check is, like a poll, an attempt not caused by a
        // release, and one landing between a release and the woken waiter's attempt would
        // barge in (the release wakes the oldest waiter; it does not reserve the lock for it).
        // Its next poll is then 30 s away (15 s × 2, under the holder's TTL).
        await until(
          async () => (await queuedOn(clients, `${lockKey}:q`, i + 1)) === clients.length,
          `${w.name} to queue`,
        )
        await until(
          async () =>
            (await Promise.all(clients.map((c) => c.pubsub('CHANNELS', `${lockKey}#*`)))).every(
              (chs) => (chs as string[]).length === i + 1,
            ),
          `${w.name} to subscribe to its wake-up channel on every node`,
        )
        await until(() => rechecks.length === i + 1, `${w.name}'s re-check after subscribing`)
      }
      const t0 = performance.now()
      await first.release()
      await Promise.all(done)
      // What the queue promises: each release wakes the oldest queued manager, and with no
      // other attempt in flight it is the one that takes the lock.
      expect(order).toEqual(['A', 'B', 'C'])
      // Every hand-over came from a release notification, not from the 30 s poll.
      expect(performance.now() - t0).toBeLessThan(2000)
    } finally {
      channel('kunci:lock:contention').unsubscribe(onContention)
    }
  })

  it('with the recommended client settings (no offline queue, no resend) a release still wakes the waiter at once', async () => {
    const settings = { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }
    const aClients = fx.clients(settings)
    const bClients = fx.clients(settings)
    const a = pod({ clients: aClients })
    const b = pod({ clients: bClients })
    // Connections up: enableOfflineQueue: false refuses commands before that.
    await ready([...aClients, ...bClients])
    const r = res()
    const lock = await a.acquire(r, { ttlMs: 10_000 })
    const waiting = b.acquire(r, { retryDelayMs: 3000, retryJitterMs: 0 })
    await until(async () => (await queuedOn(clients, `kunci:{${r}}:q`)) >= 3, 'b to queue')
    const t0 = performance.now()
    await lock.release()
    const next = await waiting
    expect(performance.now() - t0).toBeLessThan(500)
    await next.release()
  })

  it('a caller that will not retry neither marks the lock nor queues', async () => {
    const holder = pod()
    const r = res()
    const lock = await holder.acquire(r, { ttlMs: 5000 })
    await expect(pod().acquire(r, { retryCount: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError)
    // No node's copy got the waiter's "!" mark, and nobody queued (a majority holds the token).
    const values = await Promise.all(clients.map((c) => c.get(`kunci:{${r}}`)))
    expect(values.filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(3)
    expect(values.some((v) => v?.endsWith('!'))).toBe(false)
    expect(await Promise.all(clients.map((c) => c.exists(`kunci:{${r}}:q`)))).toEqual(clients.map(() => 0))
    await lock.release()
  })

  it('a foreign key without a TTL under the lock name does not make callers spin', async () => {
    const r = res()
    await Promise.all(clients.map((c) => c.set(`kunci:{${r}}`, 'x'.repeat(32))))
    const t0 = performance.now()
    const err = await pod()
      .acquire(r, { retryCount: 3, retryDelayMs: 100, retryJitterMs: 0, acquireTimeoutMs: 10_000 })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(LockNotAcquiredError)
    // Three retries at >= 100 ms each (back-off: 100, 200, 400 ms), not four attempts in a few ms.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(300)
    await Promise.all(clients.map((c) => c.del(`kunci:{${r}}`, `kunci:{${r}}:q`)))
  })
})

describe('events', () => {
  it('a hand-over inside one process publishes kunci:lock:acquired with handedOver', async () => {
    const seen: { handedOver?: boolean }[] = []
    const fn = (m: unknown) => seen.push(m as { handedOver?: boolean })
    channel('kunci:lock:acquired').subscribe(fn)
    try {
      const m = pod()
      const r = res()
      const first = await m.acquire(r, { ttlMs: 2000 })
      const second = m.acquire(r, { ttlMs: 2000 })
      await sleep(20)
      await first.release()
      await (await second).release()
    } finally {
      channel('kunci:lock:acquired').unsubscribe(fn)
    }
    expect(seen.filter((m) => m.handedOver === true).length).toBe(1)
  })

  it('a paused node that the quorum decided without is still reported on kunci:lock:node-error', async () => {
    const errors: { node: number; status: string }[] = []
    const fn = (m: unknown) => errors.push(m as { node: number; status: string })
    channel('kunci:lock:node-error').subscribe(fn)
    const m = pod({ nodeTimeoutMs: 150 })
    await m.acquire(res(), { ttlMs: 1000 }).then((l) => l.release())
    const node = fx.set.nodes[4]!
    node.pause()
    try {
      const lock = await m.acquire(res(), { ttlMs: 1000 })
      await until(
        () => errors.some((e) => e.node === 4 && e.status === 'timeout'),
        'the paused node to be reported',
      )
      await lock.release()
    } finally {
      node.resume()
      channel('kunci:lock:node-error').unsubscribe(fn)
    }
  })
})
