/**
 * The steppable wall clock: a node's CLOCK_REALTIME moves when the test says so, while it runs
 * and across an empty restart (a host's clock outlives Redis), and Redis's own view of time
 * (TIME, INFO uptime, key expiry) follows it. Redis's monotonic clock is not moved.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InvalidOptionError, type NodeSet, startNodes, until } from '../src/index.js'
import { client } from './support.js'

async function serverTimeMs(port: number): Promise<number> {
  const c = client(port)
  try {
    const [s, us] = await c.time()
    return Number(s) * 1000 + Math.floor(Number(us) / 1000)
  } finally {
    c.disconnect()
  }
}

async function infoField(port: number, field: string): Promise<number> {
  const c = client(port)
  try {
    const m = new RegExp(`^${field}:(-?\\d+)`, 'm').exec(await c.info('server'))
    return Number(m?.[1])
  } finally {
    c.disconnect()
  }
}

describe('steppableWallClock', () => {
  let set: NodeSet
  beforeAll(async () => {
    set = await startNodes({ count: 1, proxy: false, steppableWallClock: true })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('starts true, steps forward while running, and the step outlives an empty restart', async () => {
    const node = set.nodes[0]!
    expect(Math.abs((await serverTimeMs(node.port)) - Date.now())).toBeLessThan(2_000)
    const c = client(node.port)
    try {
      await c.set('k', 'v', 'PX', 60_000)
      node.setWallClockOffset(120_000)
      // A step forward is what NTP does to a clock that was behind: keys expire by it.
      await until(
        async () => (await serverTimeMs(node.port)) - Date.now() > 110_000,
        'the node clock to step',
      )
      expect(await c.exists('k')).toBe(0)
      expect(await infoField(node.port, 'uptime_in_seconds')).toBeGreaterThanOrEqual(120)
    } finally {
      c.disconnect()
    }
    await node.restart({ empty: true })
    expect((await serverTimeMs(node.port)) - Date.now()).toBeGreaterThan(110_000)
    expect(await infoField(node.port, 'uptime_in_seconds')).toBeLessThan(60)
    node.setWallClockOffset(0)
    await until(
      async () => Math.abs((await serverTimeMs(node.port)) - Date.now()) < 2_000,
      'the clock to come back',
    )
  })

  it('is refused on nodes started without it', async () => {
    const plain = await startNodes({ count: 1, proxy: false })
    try {
      expect(() => plain.nodes[0]!.setWallClockOffset(1000)).toThrow(InvalidOptionError)
    } finally {
      await plain.stop()
    }
  })
})
