/**
 * The Redis ACL rules of the service's own user, shared by the local stack (`flash-sale-lab up`) and
 * the Kubernetes manifests (deploy/), so both grant the same thing.
 *
 * Everything the service, the worker and kunci need, nothing that can wipe, reconfigure or block
 * a server: `@dangerous` (KEYS, FLUSHALL, FLUSHDB, CONFIG SET, DEBUG, SHUTDOWN, MONITOR, …) is
 * removed, then the few read-only introspection commands kunci and ioredis' Cluster client rely on
 * are added back (INFO for kunci's restart quarantine, CONFIG GET for its persistence warning,
 * ACL DRYRUN for its check that the default user can replay the AOF (KUNCI_W_AOF_ACL: it answers
 * what a user may run, never a password or a hash), CLUSTER SLOTS/SHARDS/NODES/INFO for slot
 * routing).
 */
export const APP_ACL_RULES = Object.freeze([
  'on',
  'resetkeys',
  '~*',
  'resetchannels',
  '&*',
  '+@all',
  '-@dangerous',
  '+info',
  '+config|get',
  '+acl|dryrun',
  '+cluster|slots',
  '+cluster|shards',
  '+cluster|nodes',
  '+cluster|info',
  '+cluster|myid',
  '+client|setname',
  '+client|id',
  '+client|info',
])

/** `ACL SETUSER <name> reset >password <rules…>` arguments, or redis.conf `user` line parts. */
export function aclUserArgs(username: string, password: string): string[] {
  return [username, 'reset', `>${password}`, ...APP_ACL_RULES]
}
