import { readFileSync, statSync } from 'node:fs'
import { Cluster } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  DEFAULT_ADMIN_USERNAME,
  InvalidOptionError,
  killClusterMaster,
  type NodeSet,
  type RedisCluster,
  type RedisNode,
  runChaos,
  startCluster,
  startNodes,
  until,
} from '../src/index.js'
import { client } from './support.js'

const ADMIN_PASSWORD = 'admin-pw "with" \\ quotes and spaces'

/** The error a command gets, or undefined when it succeeded. */
async function failure(p: Promise<unknown>): Promise<Error | undefined> {
  try {
    await p
    return undefined
  } catch (err) {
    return err as Error
  }
}

// Redis error replies start with their code (NOAUTH, WRONGPASS, NOPERM): that prefix is what we
// assert on, the rest of the text is Redis' wording.
const codeOf = (err: Error | undefined) => err?.message.split(' ')[0]

describe('adminUser on independent nodes: the default user is off', () => {
  let set: NodeSet

  beforeAll(async () => {
    set = await startNodes({ count: 2, proxy: false, adminUser: { password: ADMIN_PASSWORD } })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('refuses a connection without credentials (NOAUTH) and AUTH as default (WRONGPASS)', async () => {
    const node = set.nodes[0]!
    // No ready check: its INFO would be refused and ioredis would close the connection.
    const anonymous = client(node.port, { enableReadyCheck: false })
    try {
      expect(codeOf(await failure(anonymous.ping()))).toBe('NOAUTH')
      expect(codeOf(await failure(anonymous.get('k')))).toBe('NOAUTH')
      // Any password: the default user is off and has none.
      expect(codeOf(await failure(anonymous.auth('default', ADMIN_PASSWORD)))).toBe('WRONGPASS')
      expect(codeOf(await failure(anonymous.auth(ADMIN_PASSWORD)))).toBe('WRONGPASS')
      expect(codeOf(await failure(anonymous.auth('default', '')))).toBe('WRONGPASS')
    } finally {
      anonymous.disconnect()
    }
  })

  it('lets the admin user in, with every permission', async () => {
    expect(set.username).toBe(DEFAULT_ADMIN_USERNAME)
    expect(set.password).toBe(ADMIN_PASSWORD)
    const node = set.nodes[0]!
    expect(node.username).toBe(DEFAULT_ADMIN_USERNAME)
    const admin = client(node.port, { username: node.username!, password: node.password! })
    try {
      expect(await admin.call('ACL', 'WHOAMI')).toBe(DEFAULT_ADMIN_USERNAME)
      await admin.set('k', 'v')
      expect(await admin.get('k')).toBe('v')
      expect(await admin.config('GET', 'maxmemory-policy')).toHaveLength(2)
      const flags = (await admin.call('ACL', 'GETUSER', 'default')) as unknown[]
      expect(flags[1]).toContain('off')
      expect(flags[1]).not.toContain('on')
    } finally {
      admin.disconnect()
    }
  })

  it('keeps the passwords off the command line (redis.conf with mode 0600)', async () => {
    const cmdline = readFileSync(`/proc/${set.nodes[0]!.pid}/cmdline`, 'utf8')
    expect(cmdline).not.toContain('admin-pw')
    const conf = `${set.nodes[0]!.dataDir}/redis.conf`
    expect(statSync(conf).mode & 0o077).toBe(0)
  })

  it('a replica syncs with masteruser/masterauth as the PSYNC-only replication user', async () => {
    const [primary, replica] = set.nodes as [RedisNode, RedisNode]
    const creds = { username: primary.username!, password: primary.password! }
    const p = client(primary.port, creds)
    const r = client(replica.port, creds)
    try {
      const rules = (await p.call('ACL', 'GETUSER', 'kunci-replication')) as unknown[]
      const commands = String(rules[rules.indexOf('commands') + 1])
      expect(commands).toContain('-@all')
      expect(commands).toContain('+psync')
      await p.set('replicated', 'yes')
      // Standalone Redis 7 waits 5 s for more replicas before a diskless sync: we have one.
      await p.config('SET', 'repl-diskless-sync-delay', '0')
      await r.replicaof(primary.host, primary.serverPort)
      await until(
        async () => /master_link_status:up/.test(await r.info('replication')),
        'the replica link to be up',
        20_000,
      )
      expect(await r.get('replicated')).toBe('yes')
      // The replication user may do nothing else.
      expect(await p.call('ACL', 'DRYRUN', 'kunci-replication', 'GET', 'replicated')).not.toBe('OK')
      expect(await p.call('ACL', 'DRYRUN', 'kunci-replication', 'PSYNC', '?', '-1')).toBe('OK')
    } finally {
      await r.replicaof('NO', 'ONE').catch(() => {})
      p.disconnect()
      r.disconnect()
    }
  })

  it('rejects password together with adminUser, and a bad admin name, before starting anything', async () => {
    const both = await failure(startNodes({ count: 1, password: 'x', adminUser: true }))
    expect(both).toBeInstanceOf(InvalidOptionError)
    expect((both as InvalidOptionError).option).toBe('password')
    const bad = await failure(startNodes({ count: 1, adminUser: { username: 'default' } }))
    expect((bad as InvalidOptionError).option).toBe('adminUser.username')
    const newline = await failure(startNodes({ count: 1, adminUser: { password: 'a\nuser evil on' } }))
    expect((newline as InvalidOptionError).option).toBe('adminUser.password')
  })
})

describe('adminUser on a cluster: failover, rejoin, migrateSlot and chaos keep working', () => {
  let cluster: RedisCluster
  let redis: Cluster

  beforeAll(async () => {
    cluster = await startCluster({ adminUser: true })
    redis = new Cluster(cluster.startupNodes, {
      redisOptions: { username: cluster.username!, password: cluster.password! },
      slotsRefreshTimeout: 2_000,
    })
    redis.on('error', () => {})
  })
  afterAll(async () => {
    redis?.disconnect()
    await cluster?.stop()
  })

  it('generates an admin password, and every node refuses anonymous clients', async () => {
    expect(cluster.username).toBe(DEFAULT_ADMIN_USERNAME)
    expect(cluster.password).toMatch(/^[\w-]{32}$/)
    for (const node of cluster.nodes) {
      const anonymous = client(node.port, { enableReadyCheck: false })
      try {
        expect(codeOf(await failure(anonymous.cluster('INFO')))).toBe('NOAUTH')
      } finally {
        anonymous.disconnect()
      }
    }
    for (let i = 0; i < 50; i++) await redis.set(`k:${i}`, String(i))
  })

  it('migrateSlot moves keys with MIGRATE … AUTH2 as the admin user', async () => {
    const tag = '{moved}'
    const slot = (await redis.cluster('KEYSLOT', tag)) as number
    for (let i = 0; i < 20; i++) await redis.set(`${tag}:${i}`, 'v')
    const from = await cluster.slotOwner(slot)
    const to = (await cluster.masters()).find((m) => m !== from)!
    await cluster.migrateSlot(slot, to, { keysPerBatch: 7 })
    expect(await cluster.slotOwner(slot)).toBe(to)
    for (let i = 0; i < 20; i++) expect(await redis.get(`${tag}:${i}`)).toBe('v')
  })

  it('a kill-master chaos step fails over to the replica (it synced as the replication user) and rejoins', async () => {
    const master = (await cluster.masters())[0]!
    const replica = await cluster.replicaOf(master)
    const events = await runChaos({
      schedule: [{ at: 0, fault: 'kill-master', target: master.name }],
      faults: { 'kill-master': killClusterMaster(cluster) },
    })
    expect(events.map((e) => e.error)).toEqual([undefined])
    expect(await cluster.masters()).toContain(replica)
    expect(await cluster.masters()).not.toContain(master)
    expect(await cluster.replicaOf(replica!)).toBe(master)
    const readsAll = async () => {
      try {
        for (let i = 0; i < 50; i++) if ((await redis.get(`k:${i}`)) !== String(i)) return false
        return true
      } catch {
        return false
      }
    }
    await until(readsAll, 'reads to succeed on every node', 15_000)
  })
})
