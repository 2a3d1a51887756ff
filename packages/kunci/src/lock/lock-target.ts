import { InvalidOptionError } from '../errors.js'
import { toRedisClient } from '../redis/client.js'
import { lockKeys } from '../redis/keys.js'
import { isClusterClient, type RedisClient } from '../redis/lua-script.js'
import type { LockTarget } from './node-ops.js'

/** Validates the resources of one acquisition and builds their keys once. */
export function buildTarget(prefix: string, resources: string | readonly string[]): LockTarget {
  if (typeof resources === 'string' && resources.length > 0) {
    // The common case, without the duplicate check.
    const k = lockKeys(prefix, resources)
    return {
      resources: Object.freeze([resources]),
      acquireKeys: [k.lock, k.fence, k.queue],
      releaseKeys: [k.lock, k.queue],
      extendKeys: [k.lock, k.fence],
      lockKeys: [k.lock],
    }
  }
  const list = typeof resources === 'string' ? [resources] : resources
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidOptionError('resources', 'expected a non-empty string or a non-empty array of strings')
  }
  const seen = new Set<string>()
  const acquireKeys: string[] = []
  const releaseKeys: string[] = []
  const extendKeys: string[] = []
  const lockKeyList: string[] = []
  for (const r of list) {
    if (typeof r !== 'string' || r.length === 0) {
      throw new InvalidOptionError('resources', 'every resource must be a non-empty string')
    }
    if (seen.has(r)) throw new InvalidOptionError('resources', `"${r}" is listed twice`)
    seen.add(r)
    const k = lockKeys(prefix, r)
    acquireKeys.push(k.lock, k.fence, k.queue)
    releaseKeys.push(k.lock, k.queue)
    extendKeys.push(k.lock, k.fence)
    lockKeyList.push(k.lock)
  }
  return {
    resources: Object.freeze([...list]),
    acquireKeys,
    releaseKeys,
    extendKeys,
    lockKeys: lockKeyList,
  }
}

/**
 * Rejects an empty client list, non-clients, and two clients for one node; returns the clients
 * as the internals use them (node-redis ones wrapped, see redis/client.ts).
 */
export function resolveClients(clients: unknown): RedisClient[] {
  if (!Array.isArray(clients) || clients.length === 0) {
    throw new InvalidOptionError(
      'clients',
      'expected a non-empty array of clients (ioredis or node-redis), one per independent Redis node',
    )
  }
  const seen = new Map<string, number>()
  return clients.map((raw: unknown, i) => {
    if (clients.indexOf(raw) !== i)
      throw new InvalidOptionError(
        'clients',
        `clients[${i}] is the same client as clients[${clients.indexOf(raw)}]`,
      )
    const c = toRedisClient(raw, 'clients', `clients[${i}]`)
    // Waiting needs a subscriber connection per node, made with duplicate().
    if (typeof c.duplicate !== 'function')
      throw new InvalidOptionError('clients', `clients[${i}] is not a client`)
    if (!isClusterClient(c)) {
      const o = c.options
      const where = o.path ? o.path : `${o.host ?? 'localhost'}:${o.port ?? 6379}/${o.db ?? 0}`
      const j = seen.get(where)
      if (j !== undefined) {
        throw new InvalidOptionError(
          'clients',
          `clients[${i}] and clients[${j}] both point at ${where}: Redlock needs independent nodes`,
        )
      }
      seen.set(where, i)
    }
    return c
  })
}
