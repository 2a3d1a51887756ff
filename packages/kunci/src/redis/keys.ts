/**
 * Every Redis key kunci's locks write is built here.
 *
 * A resource `R` with prefix `P` uses keys that share the hash tag `{R}`, so a Lua script can
 * touch them together on a Redis Cluster (one slot); the release channel is the lock key:
 *   P{R}         the lock: holder token (+ "!" while another process waits), with a TTL
 *   P{R}:fence   the highest fencing token this node granted for R (persistent)
 *   P{R}:q       waiting clients, oldest first (sorted set, TTL): a release wakes only the oldest
 *   P{R}:acked   RedisLock waitForReplicas: written just before a WAIT round on the master that
 *                granted a lock on R (replica-wait.ts); only its place in the replication stream
 *                matters, and it expires within a second
 */

export interface LockKeys {
  readonly lock: string
  readonly fence: string
  readonly queue: string
}

export function lockKeys(prefix: string, resource: string): LockKeys {
  const lock = `${prefix}{${resource}}`
  return { lock, fence: `${lock}:fence`, queue: `${lock}:q` }
}

/** The marker a WAIT round writes first: in the slot of R's lock, so only R's master accepts it. */
export function replicaMarkerKey(prefix: string, resource: string): string {
  return `${prefix}{${resource}}:acked`
}

/**
 * Whether the keys of `resource` land in one cluster slot. They share the text up to
 * and including the first `}` after our `{`, so they do unless the resource itself starts with
 * `}` (the tag would be empty and each whole key would be hashed).
 */
export function lockKeysShareSlot(resource: string): boolean {
  return !resource.startsWith('}')
}
