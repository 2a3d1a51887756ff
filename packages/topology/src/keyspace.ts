/**
 * Everything a node holds, read as plain data, so a test can compare a node before a crash with
 * the same node restarted from its AOF (issue 42): every key with its type, its contents, whether
 * it has a TTL, and for a stream its consumer groups and their pending entries.
 *
 * Read as the topology's own user (the admin user with `adminUser`), on fresh connections. What
 * moves with time is left out: a TTL is only "has one", a pending entry's idle time is dropped,
 * and so are a group's `entries-read` and `lag` (estimates that an AOF reload does not restore).
 */
import type { RedisNode } from './node.js'
import { type NodeAddress, type RespValue, sendCommand, sendCommands } from './resp.js'

export interface KeyContents {
  readonly type: string
  /** GET; HGETALL, SMEMBERS, ZRANGE … WITHSCORES sorted by member; LRANGE; XRANGE for a stream. */
  readonly value: unknown
  /** PTTL > 0: the key expires (its remaining time is not compared). */
  readonly expires: boolean
  /** Streams only: XINFO GROUPS (without entries-read, lag), and each group's pending entries (id, consumer, deliveries). */
  readonly groups?: unknown
}

/** Key → contents, keys in sorted order; plain values that toEqual compares. */
export type Keyspace = Record<string, KeyContents>

function addressOf(node: RedisNode): NodeAddress {
  return {
    host: node.host,
    port: node.serverPort,
    username: node.username,
    password: node.password,
    tls: node.tls,
  }
}

/** [field, value, field, value …] → sorted pairs. */
function pairs(flat: RespValue): [RespValue, RespValue][] {
  const list = Array.isArray(flat) ? flat : []
  const out: [RespValue, RespValue][] = []
  for (let i = 0; i + 1 < list.length; i += 2) out.push([list[i]!, list[i + 1]!])
  return out.sort(([a], [b]) => String(a).localeCompare(String(b)))
}

async function streamGroups(address: NodeAddress, key: string): Promise<unknown> {
  const groups = (await sendCommand(address, ['XINFO', 'GROUPS', key])) as RespValue[]
  const out = []
  for (const group of groups) {
    // entries-read and lag are XINFO's estimates, not data: Redis 7.0 leaves them out of the AOF
    // (its XGROUP SETID has no ENTRIESREAD), so after a reload they read null until the group
    // reads again.
    const { 'entries-read': _read, lag: _lag, ...info } = Object.fromEntries(pairs(group))
    const name = String(info.name)
    const pending = (await sendCommand(address, [
      'XPENDING',
      key,
      name,
      '-',
      '+',
      1_000_000,
    ])) as RespValue[][]
    // [id, consumer, idle ms, deliveries]: the idle time grows while we look.
    out.push({ info, pending: pending.map(([id, consumer, , deliveries]) => [id, consumer, deliveries]) })
  }
  return out.sort((a, b) => String(a.info.name).localeCompare(String(b.info.name)))
}

async function contents(address: NodeAddress, key: string): Promise<KeyContents> {
  const [type, pttl] = (await sendCommands(address, [
    ['TYPE', key],
    ['PTTL', key],
  ])) as [string, number]
  const expires = pttl > 0
  switch (type) {
    case 'string':
      return { type, expires, value: await sendCommand(address, ['GET', key]) }
    case 'hash':
      return { type, expires, value: pairs(await sendCommand(address, ['HGETALL', key])) }
    case 'set': {
      const members = (await sendCommand(address, ['SMEMBERS', key])) as RespValue[]
      return { type, expires, value: members.map(String).sort() }
    }
    case 'zset':
      return { type, expires, value: pairs(await sendCommand(address, ['ZRANGE', key, 0, -1, 'WITHSCORES'])) }
    case 'list':
      return { type, expires, value: await sendCommand(address, ['LRANGE', key, 0, -1]) }
    case 'stream':
      return {
        type,
        expires,
        value: await sendCommand(address, ['XRANGE', key, '-', '+']),
        groups: await streamGroups(address, key),
      }
    default:
      // 'none': it expired between SCAN and TYPE.
      return { type, expires, value: null }
  }
}

/** Every key of database 0 and what it holds (see the file comment). */
export async function readKeyspace(node: RedisNode): Promise<Keyspace> {
  const address = addressOf(node)
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = (await sendCommand(address, ['SCAN', cursor, 'COUNT', 1000])) as [string, string[]]
    cursor = next
    keys.push(...batch)
  } while (cursor !== '0')
  const out: Keyspace = {}
  for (const key of [...new Set(keys)].sort()) {
    const c = await contents(address, key)
    if (c.type !== 'none') out[key] = c
  }
  return out
}
