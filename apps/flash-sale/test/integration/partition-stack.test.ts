import { readFileSync } from 'node:fs'
import { eventually, type NetworkFaults, startNetworkFaults } from '@kunci/topology'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { useStack } from '../support/stack-fixture.js'

const NOBODY = 65_534
const PRODUCT = '7301'

/** One checkout, bounded: a cut instance must answer within its deadline, never hang the test. */
async function checkout(url: string, userId: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}/v1/checkout`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ product_id: Number(PRODUCT), user_id: userId }),
    signal: AbortSignal.timeout(15_000),
  })
  return { status: res.status, body: await res.json() }
}

/** The real uid of a process, from /proc. */
function uidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Uid:'))
  return Number(line?.split(/\s+/)[1])
}

// The kit issue 20's partition tests stand on: every Redis node on its own loopback address, and
// one more service instance running as another uid, so iptables can cut node links and that one
// instance's links.
describe('the local stack for partitions (distinctHosts + soloInstance)', () => {
  const fx = useStack(
    { distinctHosts: true, soloInstance: { uid: NOBODY }, clusterNodeTimeoutMs: 1_000 },
    { db: 'fs_partition' },
  )
  let faults: NetworkFaults

  beforeAll(async () => {
    faults = await startNetworkFaults({ name: 'partition-stack' })
    await fx.stack.putSale({ productId: PRODUCT, stock: 10 })
  })
  afterAll(async () => {
    await faults?.close()
  })

  it('puts every node on its own address and runs the solo instance as uid 65534 on its own port', () => {
    const { cluster, lockNodes, solo, soloUrl, url } = fx.stack
    const hosts = [...cluster.nodes, ...(lockNodes?.nodes ?? [])].map((n) => n.host)
    expect(new Set(hosts).size).toBe(hosts.length)
    expect(hosts).not.toContain('127.0.0.1')
    expect(fx.stack.env.REDIS_CLUSTER_NODES).not.toContain('127.0.0.1')
    expect(soloUrl).toBeDefined()
    expect(soloUrl).not.toBe(url)
    expect(uidOf(solo!.pid!)).toBe(NOBODY)
    expect(uidOf(fx.stack.service.pid!)).toBe(process.getuid!())
  })

  it('both the main URL and the solo URL sell (200)', async () => {
    expect((await checkout(fx.stack.url, 'main-1')).status).toBe(200)
    expect((await checkout(fx.stack.soloUrl!, 'solo-1')).status).toBe(200)
  })

  it('cutUid cuts the solo instance off from every node while the main instances keep selling; after heal it sells again', async () => {
    const cut = await faults.cutUid(NOBODY, fx.stack.cluster.nodes)
    try {
      // It cannot reach the sale's master: a 503 within its deadline (seen: 2.2 s), not a hang.
      const during = await checkout(fx.stack.soloUrl!, 'solo-2')
      expect(during.status).toBe(503)
      expect((await checkout(fx.stack.url, 'main-2')).status).toBe(200)
    } finally {
      await cut.heal()
    }
    // Within the bound for answering again after a heal (5 s), with room for a loaded machine.
    await eventually(async () => expect((await checkout(fx.stack.soloUrl!, 'solo-3')).status).toBe(200), {
      timeoutMs: 30_000,
      intervalMs: 200,
    })
  })
})
