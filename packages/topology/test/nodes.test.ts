import { existsSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { InvalidOptionError, type NodeSet, startNodes } from '../src/index.js'
import { client, isAlive, settledWithin } from './support.js'

describe('startNodes', () => {
  let set: NodeSet

  beforeAll(async () => {
    set = await startNodes({ count: 3, aof: 'always', proxy: false })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('starts independent nodes that answer PING', async () => {
    expect(set.nodes.map((n) => n.name)).toEqual(['node-0', 'node-1', 'node-2'])
    expect(new Set(set.nodes.map((n) => n.serverPort)).size).toBe(3)
    for (const node of set.nodes) {
      expect(node.running).toBe(true)
      expect(node.port).toBe(node.serverPort)
      expect(node.proxy).toBeUndefined()
      expect(isAlive(node.pid!)).toBe(true)
      const c = client(node.port)
      try {
        expect(await c.ping()).toBe('PONG')
      } finally {
        c.disconnect()
      }
    }
  })

  it('keeps AOF data across kill -9 and restart', async () => {
    const node = set.nodes[0]!
    const before = client(node.port)
    await before.set('kept', 'yes')
    before.disconnect()
    const oldPid = node.pid!
    await node.kill()
    expect(node.running).toBe(false)
    expect(node.pid).toBeUndefined()
    expect(isAlive(oldPid)).toBe(false)

    await node.restart()
    expect(node.running).toBe(true)
    expect(node.pid).not.toBe(oldPid)
    const after = client(node.port)
    try {
      expect(await after.get('kept')).toBe('yes')
    } finally {
      after.disconnect()
    }
  })

  it('loses everything on restart({ empty: true })', async () => {
    const node = set.nodes[1]!
    const before = client(node.port)
    await before.set('lost', 'yes')
    before.disconnect()
    await node.kill()
    await node.restart({ empty: true })
    const after = client(node.port)
    try {
      expect(await after.get('lost')).toBeNull()
    } finally {
      after.disconnect()
    }
  })

  it('pause makes commands time out and resume lets a pending one finish', async () => {
    const node = set.nodes[2]!
    const impatient = client(node.port, { commandTimeout: 300 })
    const patient = client(node.port)
    try {
      await impatient.ping()
      await patient.ping()
      node.pause()
      await expect(impatient.ping()).rejects.toThrow(/timed out/i)
      const pending = patient.set('after-resume', '1')
      expect(await settledWithin(pending, 300)).toBe('pending')
      node.resume()
      expect(await pending).toBe('OK')
    } finally {
      node.resume()
      impatient.disconnect()
      patient.disconnect()
    }
  })

  it('stop() is graceful, idempotent and removes the data dirs', async () => {
    const own = await startNodes({ count: 1, aof: 'everysec' })
    const node = own.nodes[0]!
    const pid = node.pid!
    await node.stop()
    expect(node.running).toBe(false)
    await node.restart()
    await own.stop()
    await own.stop()
    expect(isAlive(pid)).toBe(false)
    expect(existsSync(node.dataDir)).toBe(false)
  })

  it('requires AUTH when a password is set', async () => {
    await using own = await startNodes({ count: 1, password: 's3cret', proxy: false })
    const node = own.nodes[0]!
    expect(node.password).toBe('s3cret')
    const anonymous = client(node.port)
    const authed = client(node.port, { password: 's3cret' })
    try {
      await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/)
      expect(await authed.ping()).toBe('PONG')
      // PING after restart authenticates too, or restart() would not have resolved.
      await node.kill()
      await node.restart()
    } finally {
      anonymous.disconnect()
      authed.disconnect()
    }
  })

  it('rejects bad options with InvalidOptionError', async () => {
    await expect(startNodes({ count: 0 })).rejects.toBeInstanceOf(InvalidOptionError)
    // @ts-expect-error: not an appendfsync policy
    await expect(startNodes({ count: 1, aof: 'sometimes' })).rejects.toMatchObject({
      code: 'E_INVALID_OPTION',
    })
  })
})
