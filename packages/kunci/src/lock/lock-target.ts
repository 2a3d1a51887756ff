import { InvalidOptionError } from '../errors.js'
import { toRedisPort } from '../redis/client.js'
import { lockKeys } from '../redis/keys.js'
import type { RedisPort } from '../redis/port.js'

/** The keys of one lock, precomputed once per acquisition. */
export interface LockTarget {
  readonly resources: readonly string[]
  /** lock, fence and queue key of each resource, in that order: what acquire.lua takes. */
  readonly acquireKeys: readonly string[]
  /** lock and queue key of each resource: what release.lua takes. */
  readonly releaseKeys: readonly string[]
  /** lock and fence key of each resource: what extend.lua takes. */
  readonly extendKeys: readonly string[]
  /** The lock keys alone: the release channels, and what the batches count by. */
  readonly lockKeys: readonly string[]
}

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
 * as the internals use them: their ports (redis/client.ts).
 */
export function resolveClients(clients: unknown): RedisPort[] {
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
    const c = toRedisPort(raw, 'clients', `clients[${i}]`)
    if (c.cluster === undefined) {
      const where = c.identity
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
