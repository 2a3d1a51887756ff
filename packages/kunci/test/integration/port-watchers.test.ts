/**
 * Every lock on a client watches its connection (node-health.ts). The ioredis port fans the
 * client's 'close' and 'ready' out to its watchers from one listener each: with a listener per
 * watcher, the eleventh lock on a client printed Node's MaxListenersExceededWarning (seen in CI
 * with 11 close and 11 ready listeners on one Commander).
 */
import { Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { toRedisPort } from '../../src/redis/client.js'
import { type Fixture, ready, startFixture, until } from '../support/nodes.js'

let f: Fixture
beforeAll(async () => {
  f = await startFixture({ count: 3 })
})
afterAll(async () => {
  await f?.stop()
})

describe("the ioredis port's connection watchers", () => {
  it('twenty locks on the same clients add no listener per lock and print no warning', async () => {
    const clients = f.clients()
    await ready(clients)
    const warnings: Error[] = []
    const onWarning = (w: Error) => warnings.push(w)
    process.on('warning', onWarning)
    const before = clients.map((c) => [c.listenerCount('close'), c.listenerCount('ready')])
    const managers = Array.from(
      { length: 20 },
      () => new Redlock({ clients, onWarning: () => {}, nodeTimeoutMs: 1_000, quarantine: false }),
    )
    try {
      for (const [i, m] of managers.entries()) await (await m.acquire(`w:${i}`, { ttlMs: 5_000 })).release()
      for (const [i, c] of clients.entries()) {
        // One listener for all the watchers, and the script cache's reset on close.
        expect(c.listenerCount('close') - before[i]![0]!).toBeLessThanOrEqual(2)
        expect(c.listenerCount('ready') - before[i]![1]!).toBeLessThanOrEqual(1)
      }
      // Warnings are emitted on the next tick.
      await new Promise((r) => setImmediate(r))
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([])
    } finally {
      process.off('warning', onWarning)
      for (const m of managers) await m.close()
    }
    // Closed locks leave no watcher behind.
    for (const [i, c] of clients.entries()) expect(c.listenerCount('ready')).toBe(before[i]![1])
  })

  it('each watcher hears every close and ready of a restart; an unwatched one no longer does', async () => {
    const [client] = f.clients()
    await ready([client!])
    const port = toRedisPort(client, 'client')
    const heard = Array.from({ length: 12 }, () => ({ close: 0, ready: 0 }))
    const unwatch = heard.map((h) =>
      port.watch({
        close: () => h.close++,
        ready: () => h.ready++,
      }),
    )
    // The same events object twice is two watchers, unwatched one at a time.
    const twice = { close: 0, ready: 0 }
    const twiceEvents = { close: () => twice.close++, ready: () => twice.ready++ }
    const unwatchTwice = [port.watch(twiceEvents), port.watch(twiceEvents)]
    unwatchTwice[0]!()

    await f.set.nodes[0]!.restart()
    await until(
      () => heard.every((h) => h.close >= 1 && h.ready >= 1),
      'every watcher to hear the restart',
      20_000,
    )
    await until(() => twice.ready >= 1, 'the remaining twin watcher to hear it', 20_000)
    expect(twice.close).toBeGreaterThanOrEqual(1)

    for (const u of unwatch.slice(0, 6)) u()
    const counts = heard.map((h) => ({ ...h }))
    await f.set.nodes[0]!.restart()
    await until(
      () => heard.slice(6).every((h, i) => h.ready > counts[i + 6]!.ready),
      'the watchers left to hear it',
      20_000,
    )
    expect(heard.slice(0, 6)).toEqual(counts.slice(0, 6))
    for (const u of unwatch.slice(6)) u()
    unwatchTwice[1]!()
  })
})
