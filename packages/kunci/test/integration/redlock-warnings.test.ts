/** Start-up warnings when nodes are less durable than the configured persistence profile. */
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { type KunciWarning, Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { until } from '../support/nodes.js'

let always: NodeSet
let everysec: NodeSet
let none: NodeSet
const clients: Redis[] = []
beforeAll(async () => {
  ;[always, everysec, none] = await Promise.all([
    startNodes({ count: 1, proxy: false, aof: 'always' }),
    startNodes({ count: 1, proxy: false, aof: 'everysec' }),
    startNodes({ count: 1, proxy: false }),
  ])
})
afterAll(async () => {
  for (const c of clients) c.disconnect()
  await Promise.all([always?.stop(), everysec?.stop(), none?.stop()])
})

/** `expected`: how many warnings to wait for (they follow the nodes' checks asynchronously). */
async function warningsFor(
  persistence: 'always' | 'everysec' | 'none',
  expected: number,
): Promise<KunciWarning[]> {
  const cs = [always, everysec, none].map((s) => new Redis({ port: s.nodes[0]!.port }))
  clients.push(...cs)
  const warnings: KunciWarning[] = []
  const rl = new Redlock({ clients: cs, quarantine: false, persistence, onWarning: (w) => warnings.push(w) })
  await (await rl.acquire('w', { ttlMs: 500 })).release()
  await until(() => warnings.length >= expected, `${expected} warning(s)`)
  await rl.close()
  return warnings
}

describe('persistence warnings', () => {
  it("profile 'always' warns about the everysec node and the node without AOF", async () => {
    const w = await warningsFor('always', 2)
    expect(w.map((x) => [x.code, x.node]).sort()).toEqual([
      ['KUNCI_W_PERSISTENCE', 1],
      ['KUNCI_W_PERSISTENCE', 2],
    ])
  })
  it("profile 'everysec' warns only about the node without AOF", async () => {
    expect((await warningsFor('everysec', 1)).map((x) => x.node)).toEqual([2])
  })
  it("profile 'none' never warns", async () => {
    expect(await warningsFor('none', 0)).toEqual([])
  })
})

describe('eviction warnings', () => {
  it('warns (KUNCI_W_EVICTION) about nodes whose maxmemory-policy can evict lock keys, not about noeviction or no limit', async () => {
    const set = await startNodes({ count: 4, proxy: false })
    try {
      const cs = set.nodes.map((n) => new Redis({ port: n.port }))
      clients.push(...cs)
      // node 0: allkeys-lru, node 1: volatile-ttl (lock keys have a TTL), node 2: noeviction,
      // node 3: allkeys-lru but no memory limit (nothing is ever evicted).
      const settings: [string, string][] = [
        ['100mb', 'allkeys-lru'],
        ['100mb', 'volatile-ttl'],
        ['100mb', 'noeviction'],
        ['0', 'allkeys-lru'],
      ]
      await Promise.all(
        cs.map(async (c, i) => {
          await c.config('SET', 'maxmemory', settings[i]![0])
          await c.config('SET', 'maxmemory-policy', settings[i]![1])
        }),
      )
      const warnings: KunciWarning[] = []
      const seen = new Set<string>()
      const onWarning = (w: KunciWarning) => warnings.push(w)
      const sub = (w: unknown) => seen.add(`${(w as KunciWarning).code}:${(w as KunciWarning).node}`)
      const { channel } = await import('node:diagnostics_channel')
      channel('kunci:lock:warning').subscribe(sub)
      try {
        const rl = new Redlock({ clients: cs, quarantine: false, persistence: 'none', onWarning })
        const lock = await rl.acquire('e', { ttlMs: 5000 })
        // Every node has been checked once it has run the acquire (requests wait for the check).
        await until(
          async () => (await Promise.all(cs.map((c) => c.get('kunci:{e}')))).every((v) => v === lock.token),
          'the acquire to reach every node',
        )
        await lock.release()
        await rl.close()
      } finally {
        channel('kunci:lock:warning').unsubscribe(sub)
      }
      expect(warnings.map((w) => [w.code, w.node]).sort()).toEqual([
        ['KUNCI_W_EVICTION', 0],
        ['KUNCI_W_EVICTION', 1],
      ])
      expect(warnings[0]!.message).toMatch(/noeviction/)
      expect([...seen].sort()).toEqual(['KUNCI_W_EVICTION:0', 'KUNCI_W_EVICTION:1'])
    } finally {
      for (const c of clients.splice(0)) c.disconnect()
      await set.stop()
    }
  })
})
