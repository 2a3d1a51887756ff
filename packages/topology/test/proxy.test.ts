import { connect } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { type FaultProxy, type NodeSet, type RedisNode, startNodes } from '../src/index.js'
import { client, settledWithin } from './support.js'

describe('FaultProxy', () => {
  let set: NodeSet
  let node: RedisNode
  let proxy: FaultProxy

  beforeAll(async () => {
    set = await startNodes({ count: 1 })
    node = set.nodes[0]!
    proxy = node.proxy!
  })
  afterEach(() => proxy.reset())
  afterAll(async () => {
    await set?.stop()
  })

  it('is where clients connect: node.port reaches the redis-server on serverPort through it', async () => {
    expect(node.port).toBe(proxy.port)
    expect(node.port).not.toBe(node.serverPort)
    const c = client(node.port)
    const direct = client(node.serverPort)
    try {
      // The server behind node.port is the one listening on serverPort, and what is written
      // through the proxy is what that server holds.
      expect(await c.config('GET', 'port')).toEqual(['port', String(node.serverPort)])
      await c.set('proxy:through', 'yes')
      expect(await direct.get('proxy:through')).toBe('yes')
      // And the proxy is in the path: cut it off, and node.port stops answering while the server
      // itself still does.
      proxy.blackhole(true)
      expect(await settledWithin(c.ping(), 300)).toBe('pending')
      expect(await direct.ping()).toBe('PONG')
    } finally {
      c.disconnect()
      direct.disconnect()
    }
  })

  it('adds latency in both directions and keeps replies in order', async () => {
    const c = client(node.port)
    try {
      await c.ping()
      proxy.setLatency(100, 20)
      const started = performance.now()
      await c.ping()
      // 100 ms on the way in and 100 ms on the way out.
      expect(performance.now() - started).toBeGreaterThanOrEqual(195)
      const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => c.echo(String(i))))
      expect(replies).toEqual(Array.from({ length: 20 }, (_, i) => String(i)))
    } finally {
      c.disconnect()
    }
  })

  it('latency one way only: a round trip of the latency, not twice it', async () => {
    const c = client(node.port)
    try {
      await c.ping()
      for (const direction of ['to-node', 'to-client'] as const) {
        proxy.setLatency(100, 0, direction)
        const started = performance.now()
        await c.ping()
        const rtt = performance.now() - started
        expect(rtt).toBeGreaterThanOrEqual(95)
        // Twice 100 ms would be 200: one way only.
        expect(rtt).toBeLessThan(190)
      }
      expect(() => proxy.setLatency(1, 0, 'sideways' as never)).toThrow(RangeError)
    } finally {
      proxy.setLatency(0)
      c.disconnect()
    }
  })

  it('packet loss delays a share of chunks by the retransmission time, in order, never losing one', async () => {
    const c = client(node.port)
    try {
      await c.ping()
      proxy.setPacketLoss(1, 150)
      const started = performance.now()
      await c.ping()
      // Lost on the way in and on the way out: two retransmissions.
      expect(performance.now() - started).toBeGreaterThanOrEqual(295)
      proxy.setPacketLoss(0.3, 50)
      const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => c.echo(String(i))))
      expect(replies).toEqual(Array.from({ length: 40 }, (_, i) => String(i)))
      // One command at a time: some are delayed by a retransmission, and none is lost.
      let slow = 0
      for (let i = 0; i < 40; i++) {
        const t = performance.now()
        expect(await c.echo(`x${i}`)).toBe(`x${i}`)
        if (performance.now() - t >= 45) slow++
      }
      // P(no loss in 80 chunks at 30 %) is 4e-13; P(all lost) likewise.
      expect(slow).toBeGreaterThan(0)
      expect(slow).toBeLessThan(40)
      expect(() => proxy.setPacketLoss(1.5)).toThrow(RangeError)
    } finally {
      c.disconnect()
    }
  })

  it('blackhole makes commands hang on old and new connections, and lifting it lets new ones through', async () => {
    const old = client(node.port)
    await old.ping()
    proxy.blackhole(true)
    const fresh = client(node.port)
    let next: ReturnType<typeof client> | undefined
    try {
      expect(await settledWithin(old.ping(), 400)).toBe('pending')
      expect(await settledWithin(fresh.ping(), 400)).toBe('pending')
      proxy.blackhole(false)
      // A connection made after the blackhole lifted: the old ones lost bytes mid-protocol.
      next = client(node.port)
      expect(await next.ping()).toBe('PONG')
    } finally {
      old.disconnect()
      fresh.disconnect()
      next?.disconnect()
    }
  })

  it('dropConnections resets current client sockets', async () => {
    const socket = connect({ host: '127.0.0.1', port: node.port })
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write('PING\r\n')
    await new Promise((resolve) => socket.once('data', resolve))
    const closed = new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
      let error: NodeJS.ErrnoException | undefined
      socket.on('error', (e) => (error = e))
      socket.once('close', () => resolve(error))
    })
    proxy.dropConnections()
    expect((await closed)?.code).toBe('ECONNRESET')
  })

  it('refuse closes new connections at once', async () => {
    proxy.refuse(true)
    const socket = connect({ host: '127.0.0.1', port: node.port })
    socket.on('error', () => {})
    const received: Buffer[] = []
    socket.on('data', (d) => received.push(d))
    socket.write('PING\r\n')
    await new Promise((resolve) => socket.once('close', resolve))
    expect(received).toHaveLength(0)
  })

  it('keeps working across node restarts', async () => {
    await node.kill()
    const whileDown = client(node.port)
    try {
      await expect(whileDown.ping()).rejects.toThrow()
    } finally {
      whileDown.disconnect()
    }
    await node.restart()
    const c = client(node.port)
    try {
      expect(await c.ping()).toBe('PONG')
    } finally {
      c.disconnect()
    }
  })
})
