/**
 * Issue 42: Redis replays a script's effects from the AOF as MULTI … EXEC run as the `default`
 * user and re-checks its ACL. With the default user off and without permissions, a node killed
 * with -9 and restarted from its AOF keeps the plain commands and loses everything scripts wrote
 * (redis/redis#14541, fixed by #14545; valkey#3983). adminUser's `user default off resetpass
 * ~* &* +@all` keeps it all, and still lets no client log in as the default user.
 *
 * The first test fails the day the server carries the fix: then the bug is gone from this
 * machine's Redis and the docs' "affected" should say which version fixed it.
 */
import { afterEach, describe, expect, it } from 'vitest'
import {
  DEFAULT_USER_LINE,
  InvalidOptionError,
  type NodeSet,
  type RedisNode,
  readKeyspace,
  startNodes,
} from '../src/index.js'
import { client } from './support.js'

const sets: NodeSet[] = []
afterEach(async () => {
  for (const s of sets.splice(0)) await s.stop()
})

/** One admin-user node with `appendfsync always`; `defaultUserRules`: the `user default …` rules. */
async function aofNode(defaultUserRules?: string): Promise<RedisNode> {
  const adminUser = defaultUserRules === undefined ? true : { defaultUserRules }
  const set = await startNodes({ count: 1, proxy: false, aof: 'always', adminUser })
  sets.push(set)
  return set.nodes[0]!
}

/** A script's writes (one MULTI … EXEC in the AOF) and a plain SET, then kill -9 and a restart. */
async function writeKillRestart(node: RedisNode): Promise<{ before: unknown; after: unknown }> {
  const admin = client(node.port, { username: node.username!, password: node.password! })
  try {
    await admin.eval(
      "redis.call('SET', KEYS[1], 'v1'); redis.call('INCR', KEYS[2]); redis.call('HSET', KEYS[3], 'f', 'v')",
      3,
      'by-script:k1',
      'by-script:n',
      'by-script:h',
    )
    await admin.set('plain', 'p')
  } finally {
    admin.disconnect()
  }
  const before = await readKeyspace(node)
  await node.kill()
  await node.restart()
  return { before, after: await readKeyspace(node) }
}

describe('restart from the AOF with the default user off (Redis replays MULTI … EXEC as the default user)', () => {
  it('the bug is real here: `user default off` alone keeps the plain SET and drops what the script wrote', async () => {
    // The line topology (and the manifests) had before issue 42.
    const node = await aofNode('off')
    const admin = client(node.port, { username: node.username!, password: node.password! })
    try {
      const rules = (await admin.call('ACL', 'GETUSER', 'default')) as unknown[]
      expect(rules[rules.indexOf('commands') + 1]).toBe('-@all')
    } finally {
      admin.disconnect()
    }
    const { before, after } = await writeKillRestart(node)
    expect(Object.keys(before as object).sort()).toEqual([
      'by-script:h',
      'by-script:k1',
      'by-script:n',
      'plain',
    ])
    expect(Object.keys(after as object)).toEqual(['plain'])
  })

  it(`adminUser's \`${DEFAULT_USER_LINE}\` brings every key back, and the default user still cannot log in`, async () => {
    const node = await aofNode()
    const { before, after } = await writeKillRestart(node)
    expect(Object.keys(before as object)).toHaveLength(4)
    expect(after).toEqual(before)
    const anonymous = client(node.port, { enableReadyCheck: false })
    try {
      await expect(anonymous.get('plain')).rejects.toThrow(/^NOAUTH/)
      await expect(anonymous.auth('default', '')).rejects.toThrow(/^WRONGPASS/)
    } finally {
      anonymous.disconnect()
    }
  })
})

describe('adminUser.defaultUserRules', () => {
  it('refuses rules that would let a client log in as the default user, before starting anything', async () => {
    for (const rules of ['on ~* +@all', 'off nopass', 'off >secret', '~* +@all']) {
      const err = await startNodes({ count: 1, adminUser: { defaultUserRules: rules } }).catch(
        (e: unknown) => e,
      )
      expect(err, rules).toBeInstanceOf(InvalidOptionError)
      expect((err as InvalidOptionError).option).toBe('adminUser.defaultUserRules')
    }
  })
})
