/**
 * Would a lock node restarted from its AOF keep what kunci's scripts wrote? (issue 42)
 *
 * Redis writes a script's effects to the AOF as MULTI … EXEC. When it loads the AOF at start-up
 * it runs that EXEC as the `default` user and re-checks the user's ACL for every queued command;
 * a command the default user may not run is refused without an error reaching anyone, so the
 * whole block is dropped while the plain commands around it load. A hardened node typically
 * switches the default user off with no permissions (`user default off`): restarted from its AOF,
 * it comes back without the locks and fencing tokens it granted. The fix for an operator is to
 * keep the default user off but give it the permissions (`user default off resetpass ~* &* +@all`:
 * still no client can log in as it). Upstream: redis/redis#14541, fixed by redis/redis#14545;
 * valkey-io/valkey#3983 (docs/errors.md#kunci_w_aof_acl).
 *
 * The check asks the node the question EXEC will ask: `ACL DRYRUN default <command> <key> …`
 * for each write the lock scripts make, on a key under the manager's prefix. DRYRUN runs the
 * same permission check (commands, keys, channels) and ignores whether the user is on or off,
 * which is what the AOF's replay does too.
 */
import type { RedisPort } from '../redis/port.js'

/**
 * Every write kunci's lock scripts make (scripts/*.lua: acquire, extend, release, unqueue,
 * fenced-write), with arguments of a valid arity. PUBLISH is left out: Redis never writes it to
 * the AOF. test/unit/aof-acl.test.ts keeps this list in step with the scripts.
 */
export const SCRIPT_WRITES: readonly (readonly string[])[] = Object.freeze([
  ['SET', '1'],
  ['SETRANGE', '0', '1'],
  ['PEXPIRE', '1000'],
  ['DEL'],
  ['HSET', 'f', '1'],
  ['ZADD', '1', 'm'],
  ['ZREM', 'm'],
  ['ZPOPMIN'],
])

/**
 * Does the server re-check the default user's ACL when it replays the AOF? Every server with
 * ACLs (Redis and Valkey report `redis_version` 6.0 or later) has done so until the fix. No
 * release carrying redis/redis#14545 or the Valkey fix could be confirmed when this was written,
 * so every such version is treated as affected; the day one is, its version goes here.
 */
export function replaysAofWithAclCheck(info: ReadonlyMap<string, string>): boolean {
  const major = Number((info.get('redis_version') ?? '').split('.')[0])
  return Number.isInteger(major) && major >= 6
}

/** What the default user may do at the AOF's EXEC. */
export type AofReplay =
  | { readonly kind: 'kept' }
  /** `command`: the first write it may not run; everything scripts wrote is dropped at reload. */
  | { readonly kind: 'dropped'; readonly command: string; readonly reason: string }
  /** ACL DRYRUN was refused (a restricted user: NOPERM) or is unknown (Redis 6.2). */
  | { readonly kind: 'unreadable'; readonly error: Error }

/** Asks the node, as the default user would be asked at the AOF's EXEC, about every script write. */
export async function checkAofReplay(port: RedisPort, key: string): Promise<AofReplay> {
  for (const [command, ...args] of SCRIPT_WRITES) {
    let reply: unknown
    try {
      reply = await port.send('acl', ['DRYRUN', 'default', command!, key, ...args], { key })
    } catch (err) {
      return { kind: 'unreadable', error: err instanceof Error ? err : new Error(String(err)) }
    }
    // OK, or the reason as a status or bulk string ("This user has no permissions to run …").
    if (reply !== 'OK') return { kind: 'dropped', command: command!, reason: String(reply) }
  }
  return { kind: 'kept' }
}
