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
