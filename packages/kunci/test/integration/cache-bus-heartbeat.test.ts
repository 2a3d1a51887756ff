/**
 * The bus heartbeat (bus.ts): a subscriber whose node stops answering is dropped (L1 is then
 * bypassed), but a process that was merely too busy to read the PONG is not.
 */
import { describe, expect, it } from 'vitest'
import type { Cache } from '../../src/cache/cache.js'
import { collect, standaloneCacheSuite, uniquePrefix, until } from '../fixtures/cache-test-kit.js'

const suite = standaloneCacheSuite(1)
const HEARTBEAT_MS = 100

/**
 * L1 hits by 16 callers for `ms`: each resolves in a microtask, so the process reads no socket
 * and runs no timer until the burst ends, like the benchmark's L1 phase.
 */
async function burstOfL1Hits(cache: Cache, keys: string[], ms: number): Promise<void> {
  const end = performance.now() + ms
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < end) {
        await cache.getOrSet({ key: keys[(Math.random() * keys.length) | 0]!, loader: () => 'reloaded' })
      }
    }),
  )
}

async function warmCache(prefix: string): Promise<{ cache: Cache; keys: string[] }> {
  const cache = suite.newCache({ prefix, l1MaxEntries: 100, busHeartbeatMs: HEARTBEAT_MS })
  await until(() => cache.busConnected, 'the bus to subscribe')
  const keys = Array.from({ length: 50 }, (_, i) => `k:${i}`)
  for (const key of keys) await cache.set({ key, value: key })
  return { cache, keys }
}

describe('Cache bus heartbeat', () => {
  it('keeps the bus (and L1) through bursts of L1 hits that starve I/O for many heartbeat periods', async () => {
    const { cache, keys } = await warmCache(uniquePrefix('busy'))
    const drops = collect(cache, 'bus-drop')
    // Started from each phase of the event loop: from the check phase (setImmediate), the
    // heartbeat timer used to fire again before the poll phase read the PONG.
    for (const start of [setImmediate, (f: () => void) => setTimeout(f, 0), queueMicrotask]) {
      for (let i = 0; i < 3; i++) {
        await new Promise<void>((resolve, reject) =>
          start(() => {
            burstOfL1Hits(cache, keys, HEARTBEAT_MS * 4)
              .then(() => burstOfL1Hits(cache, keys, HEARTBEAT_MS * 4))
              .then(resolve, reject)
          }),
        )
        // Two heartbeat periods for the timer to act on whatever the burst left outstanding.
        await new Promise((r) => setTimeout(r, HEARTBEAT_MS * 2))
      }
    }
    expect(drops).toEqual([])
    expect(cache.busConnected).toBe(true)
  })

  it('drops the bus when the node stops answering, and subscribes again once it is back', async () => {
    const { cache } = await warmCache(uniquePrefix('paused'))
    const drops = collect(cache, 'bus-drop')
    const node = suite.nodes.nodes[0]!
    node.pause()
    try {
      await until(() => drops.length > 0, 'the heartbeat to drop the bus', 10_000)
    } finally {
      node.resume()
    }
    expect(drops[0]).toEqual({ reason: 'heartbeat timed out' })
    expect(cache.busConnected).toBe(false)
    await until(() => cache.busConnected, 'the bus to subscribe again', 15_000)
  })
})
