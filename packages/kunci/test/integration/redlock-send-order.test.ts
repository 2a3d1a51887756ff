/**
 * Send order (send-order.ts): an operation writes first to the node whose reply decides the
 * quorum, learned from the round trips of real replies. Nodes behind proxies with different
 * latencies; the order the manager learned is read from its internals, as nothing else shows it.
 */
import { Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, ready, startFixture, until } from '../support/nodes.js'

let fx: Fixture
let rl: Redlock
beforeAll(async () => {
  fx = await startFixture({ count: 5 })
  await ready(fx.clients())
  rl = new Redlock({ clients: fx.clients(), quarantine: false, onWarning: () => {} })
})
afterAll(async () => {
  await rl?.close()
  for (const n of fx?.set.nodes ?? []) n.proxy?.reset()
  await fx?.stop()
})

// A time past every earlier one, so that each call recomputes the order (it is kept 200 ms).
let far = 1e9
const learned = () =>
  (rl as unknown as { nodes: { order: { order(now: number): readonly number[] } } }).nodes.order.order(
    (far += 1e6),
  )

describe('the quorum-deciding node is written to first', () => {
  it('learns the order from the replies and follows a node that turns slow', async () => {
    // Added latency per node (ms, each way): by round trip 1 < 3 < 2 < 0 < 4. The third fastest
    // (2) decides a quorum of 3: it goes first, then 3 and 1, then 0 and 4.
    const latency = [12, 0, 8, 4, 16]
    latency.forEach((ms, i) => {
      fx.set.nodes[i]!.proxy!.setLatency(ms)
    })
    let n = 0
    const cycle = async () => {
      const lock = await rl.acquire(`send-order-${n++}`)
      await lock.release()
    }
    // Locks are taken and released until the replies taught the manager the expected order.
    const untilOrder = (expected: string, timeoutMs: number) =>
      until(
        async () => {
          await cycle()
          return learned().join() === expected
        },
        `the learned send order to become ${expected}`,
        timeoutMs,
      )
    await untilOrder('2,3,1,0,4', 30_000)
    // Node 1 turns slow (40 ms): 3 becomes the fastest, 0 joins the quorum group and decides it.
    fx.set.nodes[1]!.proxy!.setLatency(40)
    await untilOrder('0,2,3,4,1', 60_000)
    // Every lock was granted and released on the way: the order changes nothing else.
    expect(n).toBeGreaterThan(2)
  })
})
