/**
 * A node link promises call order: a release (or hand-over) reaches a node after the acquire it
 * follows. A script the node has not cached yet (fresh or restarted node, its first use) is
 * answered NOSCRIPT and re-sent as EVAL one round trip later; a later call with a cached script
 * must not overtake it there.
 */
import type { Redis } from 'ioredis'
import { Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, ready, startFixture, until } from '../support/nodes.js'

let fx: Fixture
let clients: Redis[]
let rl: Redlock
beforeAll(async () => {
  // Fresh nodes: no script is cached on them yet.
  fx = await startFixture({ count: 5 })
  clients = fx.clients()
  await ready(clients)
  rl = new Redlock({ clients: fx.clients(), quarantine: false, onWarning: () => {} })
})
afterAll(async () => {
  await rl?.close()
  await fx?.stop()
})

const values = (key: string) => Promise.all(clients.map((c) => c.get(key)))
const allGone = async (key: string) => (await values(key)).every((v) => v === null)

describe('call order on a node across a script cache miss', () => {
  it('a release never overtakes the hand-over it follows on a slow node, so no node keeps the released lock', async () => {
    // Cache the lean scripts (acquire-one, release-one) on every node; the hand-over's batched
    // script (acquire.lua) stays uncached.
    const warm = await rl.acquire('order-warm', { ttlMs: 30_000 })
    await warm.release()
    await until(() => allGone('kunci:{order-warm}'), 'the warm-up lock to be gone from every node')

    const r = 'order-handover'
    const key = `kunci:{${r}}`
    const first = await rl.acquire(r, { ttlMs: 30_000 })
    await until(async () => (await values(key)).every((v) => v === first.token), 'first on every node')
    // The last node answers 200 ms late each way: the hand-over is decided without it.
    const slow = fx.set.nodes[4]!.proxy!
    slow.setLatency(200)
    try {
      const second = rl.acquire(r, { ttlMs: 30_000 })
      await first.release()
      const handed = await second
      // Released at once (cached release-one), while the slow node's hand-over may still be
      // on its way (its NOSCRIPT answer, then the EVAL).
      await handed.release()
      // Nothing of either holder may stay behind: with the release overtaking the hand-over,
      // the slow node would keep the handed token for its whole 30 s TTL.
      await until(() => allGone(key), 'the lock to be gone from every node', 10_000)
    } finally {
      slow.reset()
    }
    expect(await values(key)).toEqual(clients.map(() => null))
  })
})
