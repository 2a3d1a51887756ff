/**
 * An acquire must not write to a value it does not own. A key of the lock's name that another
 * client (or library) wrote stays byte-for-byte as it was through kunci's acquire, wait, leave
 * the queue and release, on the minority of nodes that hold it, so that client's own
 * compare-and-delete still releases it.
 */
import type { Redis } from 'ioredis'
import { Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Fixture, ready, startFixture } from '../support/nodes.js'

const PREFIX = 'foreign:'
let fx: Fixture
let clients: Redis[]
const managers: Redlock[] = []

/** The compare-and-delete a foreign lock library runs on release (node-redlock, redsync). */
const FOREIGN_RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"

function manager(): Redlock {
  const m = new Redlock({
    clients,
    prefix: PREFIX,
    quarantine: false,
    nodeTimeoutMs: 1000,
    onWarning: () => {},
  })
  managers.push(m)
  return m
}

beforeAll(async () => {
  fx = await startFixture({ count: 5 })
  clients = fx.clients()
  await ready(clients)
})
afterAll(async () => {
  for (const m of managers) await m.close()
  await fx?.stop()
})

/** Values another client might store under the lock's key: short, long, 32 bytes, binary. */
const FOREIGN_VALUES: readonly [string, Buffer][] = [
  ['7 bytes', Buffer.from('foreign')],
  ['40 bytes', Buffer.from('0123456789abcdef0123456789abcdef-foreign')],
  ['32 bytes, not a kunci token', Buffer.from('ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ')],
  ['binary', Buffer.from([0, 255, 33, 10, 13, 0])],
]

describe('a foreign value on a minority of nodes', () => {
  for (const [label, value] of FOREIGN_VALUES) {
    for (const multi of [false, true]) {
      it(`${label}, ${multi ? 'two resources' : 'one resource'}: acquire, wait and release leave it intact`, async () => {
        const resource = `r-${label.replace(/\W+/g, '-')}-${multi ? 'multi' : 'one'}`
        const resources = multi ? [resource, `${resource}-b`] : [resource]
        const key = `${PREFIX}{${resource}}`
        // Two of five nodes: the lock still gets a majority, and the acquire meets the foreign
        // value on its held path (a caller that may retry marks and queues there).
        const foreign = clients.slice(0, 2)
        for (const c of foreign) await c.set(key, value, 'PX', 60_000)
        const m = manager()
        const lock = await m.acquire(resources, { ttlMs: 5000, retryCount: 3, retryDelayMs: 10 })
        expect(lock.isHeld).toBe(true)
        // A second caller of another manager that waits and gives up: it meets the foreign value
        // too, and both kunci's value and the foreign one are marked or queued where they are held.
        await expect(
          manager().acquire(resources, { ttlMs: 5000, retryCount: 1, retryDelayMs: 10 }),
        ).rejects.toMatchObject({ code: 'E_LOCK_NOT_ACQUIRED' })
        await lock.release()
        for (const c of foreign) expect(await c.getBuffer(key)).toEqual(value)
        // The foreign client's own release still finds its value.
        for (const c of foreign) expect(await c.eval(FOREIGN_RELEASE, 1, key, value)).toBe(1)
        for (const c of clients.slice(2)) expect(await c.exists(key)).toBe(0)
      })
    }
  }
})
