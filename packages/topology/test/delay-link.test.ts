import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type DelayLinks,
  InvalidOptionError,
  type NodeSet,
  type RedisNode,
  startDelayLinks,
  startNodes,
} from '../src/index.js'
import { client, isAlive } from './support.js'

/** `count` PINGs one after another through `port`, each round trip in ms. */
async function roundTrips(port: number, count: number): Promise<number[]> {
  const c = client(port)
  try {
    await c.ping()
    const samples: number[] = []
    for (let i = 0; i < count; i++) {
      const started = performance.now()
      await c.ping()
      samples.push(performance.now() - started)
    }
    return samples
  } finally {
    c.disconnect()
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

describe('startDelayLinks', () => {
  let set: NodeSet
  let node: RedisNode
  let links: DelayLinks

  beforeAll(async () => {
    set = await startNodes({ count: 1, proxy: false })
    node = set.nodes[0]!
    links = await startDelayLinks([
      { host: node.host, port: node.serverPort, delayMs: 40 },
      { host: node.host, port: node.serverPort, delayMs: 0.5 },
    ])
  })
  afterAll(async () => {
    await links?.stop()
    await set?.stop()
  })

  it('adds its own delay to every round trip of each link, never less', async () => {
    const slow = await roundTrips(links.ports[0]!, 15)
    const fast = await roundTrips(links.ports[1]!, 15)
    // Bytes are held on a monotonic clock from the moment the forwarder read them, so no round
    // trip can be shorter than the delay; the medians' upper bounds leave room for a loaded CI.
    expect(Math.min(...slow)).toBeGreaterThanOrEqual(40)
    expect(median(slow)).toBeLessThan(40 + 30)
    expect(Math.min(...fast)).toBeGreaterThanOrEqual(0.5)
    expect(median(fast)).toBeLessThan(40)
  })

  it('carries large values whole and in order, both ways', async () => {
    const c = client(links.ports[1]!)
    try {
      // 3 MiB in one command: many reads and writes of the forwarder's 64 KiB buffer.
      const big = Buffer.alloc(3 * 1024 * 1024)
      for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 11)) & 0xff
      const replies = await Promise.all([
        c.set('delay:big', big),
        c.getBuffer('delay:big'),
        ...Array.from({ length: 50 }, (_, i) => c.echo(`e${i}`)),
      ])
      expect(replies[0]).toBe('OK')
      expect(Buffer.compare(replies[1] as Buffer, big)).toBe(0)
      expect(replies.slice(2)).toEqual(Array.from({ length: 50 }, (_, i) => `e${i}`))
    } finally {
      c.disconnect()
    }
  })

  it('rejects a delay it cannot keep with a typed error', async () => {
    const bad = startDelayLinks([{ host: node.host, port: node.serverPort, delayMs: -1 }])
    await expect(bad).rejects.toBeInstanceOf(InvalidOptionError)
    await expect(bad).rejects.toMatchObject({ code: 'E_INVALID_OPTION', option: 'delayMs' })
    await expect(startDelayLinks([])).rejects.toMatchObject({ code: 'E_INVALID_OPTION' })
  })

  it('stops: its process exits and its ports refuse connections', async () => {
    const own = await startDelayLinks([{ host: node.host, port: node.serverPort, delayMs: 1 }])
    expect(median(await roundTrips(own.ports[0]!, 3))).toBeGreaterThanOrEqual(1)
    await own.stop()
    expect(own.pid !== undefined && isAlive(own.pid)).toBe(false)
    const refused = await new Promise<string>((resolve) => {
      const s = connect(own.ports[0]!, '127.0.0.1')
      s.once('connect', () => {
        s.destroy()
        resolve('connected')
      })
      s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'))
    })
    expect(refused).toBe('ECONNREFUSED')
  })
})
