/**
 * Issue 42: a lock node restarted from its AOF alone (kill -9, `appendfsync always`) keeps the
 * locks and fencing tokens kunci's scripts wrote, because its `default` user, off, keeps the
 * permissions that Redis' replay of the AOF's MULTI … EXEC blocks checks (topology's adminUser:
 * `user default off resetpass ~* &* +@all`). With the old `user default off` alone the node comes
 * back without them: a held lock is granted a second time (Redis 7.0.15 here; redis/redis#14541).
 * And the start-up check warns KUNCI_W_AOF_ACL about such a node, or KUNCI_W_CONFIG_UNREADABLE
 * when kunci's user may not ask (docs/errors.md).
 */
import { type NodeSet, type RedisNode, readKeyspace, startNodes, until } from '@kunci/topology'
import { Redis } from 'ioredis'
import { type KunciWarning, LockNotAcquiredError, Redlock } from 'kunci'
import { afterEach, describe, expect, it } from 'vitest'
import { CLIENT_OPTIONS } from '../support/nodes.js'

const sets: NodeSet[] = []
const clients: Redis[] = []
const managers: Redlock[] = []
afterEach(async () => {
  for (const rl of managers.splice(0)) await rl.close()
  for (const c of clients.splice(0)) c.disconnect()
  for (const s of sets.splice(0)) await s.stop()
})

/** A lock node as a deployment runs it: AOF with `appendfsync always`, the default user off. */
async function lockNode(defaultUserRules?: string): Promise<RedisNode> {
  const adminUser = defaultUserRules === undefined ? true : { defaultUserRules }
  const set = await startNodes({ count: 1, proxy: false, aof: 'always', adminUser })
  sets.push(set)
  return set.nodes[0]!
}

function connect(node: RedisNode, username = node.username!, password = node.password!): Redis {
  const c = new Redis({ host: node.host, port: node.port, username, password, ...CLIENT_OPTIONS })
  c.on('error', () => {})
  clients.push(c)
  return c
}

function manager(client: Redis, warnings: KunciWarning[] = []): Redlock {
  // No quarantine: the restarted node votes at once, so what it reloaded decides the next acquire.
  // A generous node time-out: these tests are about what the node kept, and on a loaded machine
  // the first script call after a restart (NOSCRIPT, then EVAL) may take longer than the 200 ms
  // default; a time-out would make the node's vote an outage instead of its answer.
  const rl = new Redlock({
    clients: [client],
    quarantine: false,
    nodeTimeoutMs: 5_000,
    onWarning: (w) => warnings.push(w),
  })
  managers.push(rl)
  return rl
}

/** The node is back and the client talks to it again (ioredis reconnects on its own schedule). */
async function reconnected(client: Redis): Promise<void> {
  await until(
    async () => (await client.ping().catch(() => null)) === 'PONG',
    'the client to reconnect',
    30_000,
  )
}

/** Locks and fences written by kunci's scripts: one lock held, one released (its fence stays). */
async function lockLoad(rl: Redlock) {
  const held = await rl.acquire('invoice:42', { ttlMs: 60_000 })
  const released = await rl.acquire('invoice:43', { ttlMs: 60_000 })
  await released.release()
  const again = await rl.acquire('invoice:43', { ttlMs: 60_000 })
  expect(again.fence).toBeGreaterThan(released.fence)
  await again.release()
  return { held, lastFence43: again.fence }
}

describe('a lock node restarted from its AOF alone', () => {
  it('keeps every lock and fence key its scripts wrote; the held lock stays held, fences go on from the stored one', async () => {
    const node = await lockNode()
    const client = connect(node)
    const rl = manager(client)
    const { held, lastFence43 } = await lockLoad(rl)
    const before = await readKeyspace(node)
    expect(Object.keys(before).sort()).toEqual([
      'kunci:{invoice:42}',
      'kunci:{invoice:42}:fence',
      'kunci:{invoice:43}:fence',
    ])
    expect(before['kunci:{invoice:42}']).toMatchObject({ value: held.token, expires: true })
    expect(before['kunci:{invoice:43}:fence']).toMatchObject({ value: String(lastFence43) })

    await node.kill()
    await node.restart()
    expect(await readKeyspace(node)).toEqual(before)
    await reconnected(client)

    // The client reconnects to the restarted node: the lock is still held there, and the next
    // holder of invoice:43 gets a fence above the one stored before the crash.
    const err = await rl.acquire('invoice:42', { ttlMs: 1_000, retryCount: 0 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(LockNotAcquiredError)
    expect((err as LockNotAcquiredError).code).toBe('E_LOCK_NOT_ACQUIRED')
    const next = await rl.acquire('invoice:43', { ttlMs: 1_000 })
    expect(next.fence).toBeGreaterThan(lastFence43)
    await next.release()
    await held.release()
  })

  it('with the old `user default off` alone it loses them: the held lock is granted again', async () => {
    const node = await lockNode('off')
    const client = connect(node)
    const rl = manager(client)
    const { held } = await lockLoad(rl)
    expect(Object.keys(await readKeyspace(node))).toHaveLength(3)

    await node.kill()
    await node.restart()
    expect(await readKeyspace(node)).toEqual({})
    await reconnected(client)
    const second = await rl.acquire('invoice:42', { ttlMs: 1_000, retryCount: 0 })
    expect(second.token).not.toBe(held.token)
    await second.release()
  })
})

describe('KUNCI_W_AOF_ACL: the start-up check of a node', () => {
  const aofAcl = (ws: KunciWarning[]) => ws.filter((w) => w.code === 'KUNCI_W_AOF_ACL')

  /** The check's 8 ACL DRYRUNs have been answered; one more round trip lets their replies land. */
  async function checked(node: RedisNode, rl: Redlock): Promise<void> {
    const admin = connect(node)
    await until(
      async () => /^cmdstat_acl\|dryrun:calls=8,/m.test(await admin.info('commandstats')),
      'the AOF check to have asked its 8 questions',
    )
    await (await rl.acquire('after-check', { ttlMs: 1_000 })).release()
  }

  it('warns about a node with AOF whose default user is off without permissions', async () => {
    const node = await lockNode('off')
    const warnings: KunciWarning[] = []
    const rl = manager(connect(node), warnings)
    await (await rl.acquire('w', { ttlMs: 1_000 })).release()
    await until(() => aofAcl(warnings).length === 1, 'KUNCI_W_AOF_ACL')
    expect(warnings.map((w) => [w.code, w.node])).toEqual([['KUNCI_W_AOF_ACL', 0]])
  })

  it('does not warn when the default user keeps its permissions (adminUser, the manifests)', async () => {
    const node = await lockNode()
    const warnings: KunciWarning[] = []
    const rl = manager(connect(node), warnings)
    await checked(node, rl)
    expect(warnings).toEqual([])
  })

  it('a user refused ACL DRYRUN gets KUNCI_W_CONFIG_UNREADABLE, not a guess; with +acl|dryrun it gets the real answer', async () => {
    const node = await lockNode('off')
    const admin = connect(node)
    // Like the service's user: everything but @dangerous, CONFIG GET and INFO added back.
    const rules = ['on', '>app-pw', '~*', '&*', '+@all', '-@dangerous', '+info', '+config|get']
    await admin.call('ACL', 'SETUSER', 'app', ...rules)
    await admin.call(
      'ACL',
      'SETUSER',
      'app-dryrun',
      ...rules.map((r) => (r === '>app-pw' ? '>dry-pw' : r)),
      '+acl|dryrun',
    )

    const refused: KunciWarning[] = []
    const rl = manager(connect(node, 'app', 'app-pw'), refused)
    await (await rl.acquire('w', { ttlMs: 1_000 })).release()
    await until(() => refused.length === 1, 'KUNCI_W_CONFIG_UNREADABLE')
    expect(refused.map((w) => [w.code, w.node])).toEqual([['KUNCI_W_CONFIG_UNREADABLE', 0]])

    const allowed: KunciWarning[] = []
    const rl2 = manager(connect(node, 'app-dryrun', 'dry-pw'), allowed)
    await (await rl2.acquire('w', { ttlMs: 1_000 })).release()
    await until(() => allowed.length === 1, 'KUNCI_W_AOF_ACL')
    expect(allowed.map((w) => [w.code, w.node])).toEqual([['KUNCI_W_AOF_ACL', 0]])
  })

  it("profile 'none' does not check", async () => {
    const node = await lockNode('off')
    const warnings: KunciWarning[] = []
    const c = connect(node)
    const rl = new Redlock({
      clients: [c],
      quarantine: false,
      persistence: 'none',
      onWarning: (w) => warnings.push(w),
    })
    managers.push(rl)
    await (await rl.acquire('w', { ttlMs: 1_000 })).release()
    const admin = connect(node)
    expect(await admin.info('commandstats')).not.toMatch(/cmdstat_acl\|dryrun/)
    expect(warnings).toEqual([])
  })
})
