/**
 * A caller that waits joins every node's wait queue where it is refused. When its attempt then
 * wins on a majority, the nodes that refused it still list it: a later release there would wake
 * a process that no longer waits instead of the real waiter behind it, and its old place would
 * put it ahead of callers that have waited longer. The winner leaves those queues (and unmarks
 * the refusing holder's lock when nobody else waits) in the same tick as the grant.
 */
import type { Redis } from 'ioredis'
import { Redlock, type RedlockOptions } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, queuedOn, ready, startFixture, until } from '../support/nodes.js'

let fx: Fixture
let clients: Redis[]
let watcher: Redis
const managers: Redlock[] = []
beforeAll(async () => {
  fx = await startFixture({ count: 5, proxy: false })
  clients = fx.clients()
  await ready(clients)
})
afterAll(async () => {
  for (const m of managers) await m.close()
  watcher?.disconnect()
  await fx?.stop()
})

function manager(cs: Redis[], o: Partial<RedlockOptions> = {}): Redlock {
  const m = new Redlock({ clients: cs, quarantine: false, onWarning: () => {}, ...o })
  managers.push(m)
  return m
}

describe('waiter entries after a majority grant', () => {
  it('the winner leaves the queues of the nodes that refused it; a later release there wakes the real waiter', async () => {
    const r = 'stale-1'
    const lk = `kunci:{${r}}`
    const qk = `${lk}:q`
    // X holds r on nodes 3 and 4 only (its own two-node manager).
    const x = manager(clients.slice(3))
    const lx = await x.acquire(r, { ttlMs: 20_000 })
    // W may wait, wins nodes 0-2 and is refused (and queued) on 3 and 4.
    const w = manager(fx.clients())
    const lw = await w.acquire(r, { ttlMs: 20_000, retryCount: 5 })
    expect(lw.fence).toBeGreaterThan(0)
    // Nobody waits any more: no entry stays behind, and X's lock carries no waiter mark.
    await until(async () => (await queuedOn(clients, qk)) === 0, 'the wait queues to be empty')
    await until(
      async () => (await Promise.all(clients.slice(3).map((c) => c.get(lk)))).every((v) => v === lx.token),
      "X's lock to be unmarked",
    )

    // Y really waits: it queues on all five nodes, alone.
    const y = manager(fx.clients())
    const py = y.acquire(r, { ttlMs: 5000, retryDelayMs: 5000, retryJitterMs: 0, acquireTimeoutMs: 30_000 })
    py.catch(() => {}) // awaited below; a failed assertion must not leave it unhandled
    await until(async () => (await queuedOn(clients, qk)) === 5, 'Y to queue on every node')
    const ids = new Set((await Promise.all(clients.map((c) => c.zrange(qk, 0, -1)))).flat())
    expect(ids.size).toBe(1)
    const [yId] = [...ids]
    // X's release on 3 and 4 wakes Y (its personal channel), nobody else. Before the clean-up,
    // W's stale entry sat ahead of Y there (an older score) and this release woke W instead.
    watcher = clients[3]!.duplicate()
    const woken: string[] = []
    watcher.on('pmessage', (_p: string, ch: string) => woken.push(ch))
    await watcher.psubscribe(`${lk}#*`)
    await lx.release()
    await until(() => woken.length >= 1, 'the release on node 3 to wake someone')
    // (Y may be woken more than once: its own failed attempts clean up grants on 3 and 4.)
    expect(new Set(woken)).toEqual(new Set([`${lk}#${yId}`]))
    await lw.release()
    const ly = await py
    expect(ly.fence).toBeGreaterThan(lw.fence)
    await ly.release()
  })
})
