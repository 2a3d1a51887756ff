/**
 * Every public operation of kunci that talks to Redis, run against both adapters of the port
 * (ioredis and node-redis), on standalone nodes and on a 3+3 Redis Cluster (bentocache's shared
 * driver suite, tests/helpers/driver_test_suite.ts, is the model). The first test keeps the
 * table honest: every runtime export of the package is either exercised here or listed as one
 * that never touches Redis, so a new export cannot go untested on one of the two libraries.
 */
import { type NodeSet, type RedisCluster, startCluster, startNodes } from '@kunci/topology'
import * as kunci from 'kunci'
import {
  Cache,
  deleteByPattern,
  fencedWrite,
  isNoScriptError,
  type KunciClient,
  RedisLock,
  Redlock,
  readFenced,
  Script,
  scanKeys,
  taggedKey,
} from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind } from '../../support/clients.js'
import { eventually } from '../../support/nodes.js'

/** The operations below, by the export they belong to. */
const EXERCISED = [
  'Redlock',
  'RedisLock',
  'Lock',
  'Cache',
  'scanKeys',
  'deleteByPattern',
  'fencedWrite',
  'readFenced',
  'Script',
  'isNoScriptError',
]

/** Runtime exports that never talk to Redis (pure functions, constants, error classes). */
const PURE = [
  'assertValidTag',
  'groupBySlot',
  'KEY_PART_SEPARATOR',
  'sameSlot',
  'taggedKey',
  'hashTag',
  'keySlot',
  'SLOT_COUNT',
  'DEFAULT_CACHE_OPTIONS',
  'DEFAULT_ENTRY_OPTIONS',
  'DEFAULT_DELETE_BY_PATTERN_OPTIONS',
  'DEFAULT_SCAN_OPTIONS',
  'DEFAULT_LOCK_OPTIONS',
  'MAX_SCAN_COUNT',
  'escapeGlob',
  'resolveScanOptions',
  'resolveDeleteByPatternOptions',
  'jsonSerializer',
  'fencedUpdate',
  'LOCK_CHANNELS',
  'ERROR_CODES',
  'WARNING_CODES',
]

describe('the table of public operations', () => {
  it('covers every runtime export of kunci', () => {
    const exported = Object.keys(kunci).filter((name) => !name.endsWith('Error'))
    expect(exported.filter((name) => !EXERCISED.includes(name) && !PURE.includes(name))).toEqual([])
  })
})

let nodes: NodeSet
let cluster: RedisCluster
beforeAll(async () => {
  ;[nodes, cluster] = await Promise.all([
    startNodes({ count: 3, proxy: false }),
    startCluster({ masters: 3, replicasPerMaster: 1 }),
  ])
})
afterAll(async () => {
  await nodes?.stop()
  await cluster?.stop()
})

const COUNTER = new Script(
  "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) redis.call('PEXPIRE', KEYS[1], 60000) return n",
  { name: 'counter' },
)

describe.each(CLIENT_KINDS)('every public operation with $name clients', ({ name, make }) => {
  let kind: ClientKind
  const closers: (() => Promise<unknown>)[] = []
  const tag = `api-${name}-${process.pid}`

  beforeAll(() => {
    kind = make()
  })
  afterAll(async () => {
    for (const c of closers.splice(0).reverse()) await c()
    await kind?.closeAll()
  })

  const topologies = [
    ['standalone', () => kind.standalone(nodes.nodes[0]!)],
    ['3+3 cluster', () => kind.cluster(cluster.startupNodes)],
  ] as const

  it('Redlock over three nodes: acquire, extend, release, using, several resources, dispose, close', async () => {
    const clients = await Promise.all(nodes.nodes.map((n) => kind.standalone(n)))
    const locks = new Redlock({ clients, quarantine: false, prefix: `${tag}:rl:`, onWarning: () => {} })
    const other = new Redlock({ clients, quarantine: false, prefix: `${tag}:rl:`, onWarning: () => {} })
    closers.push(() => other.close())
    const lock = await locks.acquire('r', { ttlMs: 2000 })
    expect(lock.state).toBe('held')
    await expect(other.acquire('r', { retryCount: 0 })).rejects.toMatchObject({ code: 'E_LOCK_NOT_ACQUIRED' })
    await lock.extend(5000)
    expect(lock.validityMs).toBeGreaterThan(3000)
    await lock.release()
    expect(lock.state).toBe('released')
    expect(await locks.using('r', {}, async (signal) => (signal.aborted ? 'aborted' : 'ran'))).toBe('ran')
    const both = await locks.acquire(['a', 'b'], { ttlMs: 2000 })
    expect(both.fence).toBeGreaterThan(lock.fence)
    await both[Symbol.asyncDispose]()
    expect(both.state).toBe('released')
    await locks.close()
    await expect(locks.acquire('r')).rejects.toMatchObject({ code: 'E_CLOSED' })
  })

  it.each(topologies)(
    'RedisLock on %s: acquire, extend, release, using, waitForReplicas',
    async (where, connect) => {
      const client = await connect()
      const locks = new RedisLock({
        client,
        quarantine: false,
        prefix: `${tag}:rdl:`,
        onWarning: () => {},
        // A cluster master has one replica; a standalone node has none, and WAIT answers 0.
        waitForReplicas: { replicas: 1, timeoutMs: 200 },
      })
      closers.push(() => locks.close())
      const lock = await locks.acquire(taggedKey('order', '1', 'x'), { ttlMs: 2000 })
      await lock.extend(4000)
      await lock.release()
      expect(await locks.using(taggedKey('order', '1', 'y'), {}, async () => where)).toBe(where)
    },
  )

  it.each(topologies)(
    'Cache on %s: set, get, getOrSet, delete, invalidatePrefix, events, close',
    async (_, connect) => {
      const client = await connect()
      const cache = new Cache({ client, prefix: `${tag}:c`, l1MaxEntries: 10 })
      const hits: string[] = []
      const off = cache.on('hit', (e) => hits.push(e.key))
      await eventually(() => expect(cache.busConnected).toBe(true))
      await cache.set({ key: 'k1', value: { n: 1 } })
      expect(await cache.get('k1')).toEqual({ n: 1 })
      let loads = 0
      const loader = async () => {
        loads++
        return 'loaded'
      }
      expect(await cache.getOrSet({ key: 'k2', loader })).toBe('loaded')
      expect(await cache.getOrSet({ key: 'k2', loader })).toBe('loaded')
      expect(loads).toBe(1)
      expect(await cache.delete('k1')).toBe(true)
      expect(await cache.get('k1')).toBeUndefined()
      await cache.set({ key: 'p:1', value: 1 })
      await cache.set({ key: 'p:2', value: 2 })
      expect(await cache.invalidatePrefix('p:')).toBeGreaterThanOrEqual(2)
      expect(await cache.get('p:1')).toBeUndefined()
      expect(hits.length).toBeGreaterThan(0)
      off()
      await cache.close()
    },
  )

  it.each(topologies)('scanKeys and deleteByPattern on %s', async (_, connect) => {
    const client = await connect()
    const prefix = `${tag}:scan:${Math.random().toString(36).slice(2)}:`
    const keys = Array.from({ length: 30 }, (_, i) => `${prefix}${i}`)
    // One key per call: on a cluster the keys live on different masters.
    for (const k of keys) await COUNTER.run(client, [k], [1])
    const found: string[] = []
    for await (const batch of scanKeys(client, { match: `${prefix}*`, count: 10 })) found.push(...batch)
    expect(new Set(found)).toEqual(new Set(keys))
    expect(await deleteByPattern(client, { match: `${prefix}*` })).toBe(keys.length)
    const left: string[] = []
    for await (const batch of scanKeys(client, { match: `${prefix}*` })) left.push(...batch)
    expect(left).toEqual([])
  })

  it.each(topologies)('fencedWrite and readFenced on %s', async (_, connect) => {
    const client = await connect()
    const key = `${tag}:fenced:${Math.random().toString(36).slice(2)}`
    expect(await readFenced(client, key)).toBeUndefined()
    expect(await fencedWrite(client, { key, fence: 10, value: 'a' })).toEqual({ applied: true, fence: 10 })
    expect(await fencedWrite(client, { key, fence: 9, value: 'b' })).toEqual({ applied: false, fence: 10 })
    expect(await readFenced(client, key)).toEqual({ value: 'a', fence: 10 })
  })

  it.each(topologies)(
    'Script on %s: run (EVALSHA, EVAL after SCRIPT FLUSH), load, queue in a pipeline',
    async (_, connect) => {
      const client = await connect()
      const key = `${tag}:script:{s}:${Math.random().toString(36).slice(2)}`
      expect(await COUNTER.run(client, [key], [2])).toBe(2)
      // A flushed script cache: run() falls back to EVAL, which caches it again.
      await flushScripts(client)
      expect(await COUNTER.run(client, [key], [3])).toBe(5)
      expect(await COUNTER.load(client)).toBe(COUNTER.sha)
      // In a pipeline or MULTI: EVALSHA, and the caller re-runs an entry that answered NOSCRIPT.
      const replies = await pipelined(client, (p) => COUNTER.queue(COUNTER.queue(p, [key], [1]), [key], [1]))
      expect(replies).toEqual([6, 7])
      await flushScripts(client)
      const [failed] = await pipelined(client, (p) => COUNTER.queue(p, [key], [1]), true)
      expect(isNoScriptError(failed)).toBe(true)
    },
  )
})

/** SCRIPT FLUSH on the node, or on every master of a cluster. */
async function flushScripts(client: KunciClient): Promise<void> {
  const c = client as {
    nodes?: (role: string) => { script(...args: string[]): Promise<unknown> }[]
    masters?: { client?: unknown }[]
    nodeClient?: (node: unknown) => Promise<{ sendCommand(args: string[]): Promise<unknown> }>
    script?: (...args: string[]) => Promise<unknown>
    sendCommand?: (args: string[]) => Promise<unknown>
  }
  if (typeof c.nodes === 'function') {
    await Promise.all(c.nodes('master').map((n) => n.script('FLUSH')))
  } else if (Array.isArray(c.masters) && c.nodeClient) {
    await Promise.all(c.masters.map(async (m) => (await c.nodeClient!(m)).sendCommand(['SCRIPT', 'FLUSH'])))
  } else if (typeof c.script === 'function') {
    await c.script('FLUSH')
  } else {
    await c.sendCommand!(['SCRIPT', 'FLUSH'])
  }
}

/**
 * Runs `fill` on a pipeline of the client's library (ioredis `pipeline()`, node-redis
 * `multi().execAsPipeline()`) and returns the replies, or the errors with `errors`.
 */
async function pipelined(
  client: KunciClient,
  fill: <P extends Parameters<Script['queue']>[0]>(p: P) => P,
  errors = false,
): Promise<unknown[]> {
  const c = client as {
    pipeline?: () => Parameters<Script['queue']>[0] & { exec(): Promise<[Error | null, unknown][] | null> }
    multi?: () => Parameters<Script['queue']>[0] & { execAsPipeline(): Promise<unknown[]> }
  }
  if (typeof c.pipeline === 'function') {
    const results = (await fill(c.pipeline()).exec()) ?? []
    return results.map(([err, reply]) => (errors ? err : reply))
  }
  try {
    const replies = await fill(c.multi!()).execAsPipeline()
    return errors ? replies.map(() => null) : replies
  } catch (err) {
    // node-redis rejects the whole batch with the first error reply (MultiErrorReply).
    const replies = (err as { replies?: unknown[] }).replies ?? [err]
    return replies.map((r) => (errors ? (r instanceof Error ? r : null) : r))
  }
}

describe('Script with the service’s clients: ioredis with auto-pipelining on', () => {
  it('runs scripts on keys of every master in one tick (Cluster) and in a pipeline with WAIT', async () => {
    const { Cluster, Redis } = await import('ioredis')
    const c = new Cluster(
      cluster.startupNodes.map((n) => ({ host: n.host, port: n.port })),
      { enableAutoPipelining: true },
    )
    const r = new Redis({
      host: nodes.nodes[0]!.host,
      port: nodes.nodes[0]!.port,
      enableAutoPipelining: true,
    })
    try {
      await c.ping()
      const keys = Array.from({ length: 24 }, (_, i) => `svc:${process.pid}:${i}`)
      // ioredis would file these EVALSHAs under the SHA's slot and refuse the mixed pipeline.
      expect(await Promise.all(keys.map((k) => COUNTER.run(c, [k], [1])))).toEqual(keys.map(() => 1))
      expect(await Promise.all(keys.map((k) => COUNTER.run(r, [k], [2])))).toEqual(keys.map(() => 2))
      const results = await COUNTER.queue(r.pipeline(), [keys[0]!], [1]).wait(0, 10).exec()
      expect(results?.map(([err, v]) => err ?? v)).toEqual([3, 0])
    } finally {
      c.disconnect()
      r.disconnect()
    }
  })
})
