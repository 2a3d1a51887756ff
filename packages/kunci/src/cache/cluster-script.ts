/**
 * runScript for the cache's scripts, safe on an ioredis Cluster with `enableAutoPipelining`.
 *
 * ioredis puts an auto-pipelined command in the pipeline of the node that serves its first
 * argument, taken as a key. For EVALSHA that argument is the SHA, not a key: every script call
 * of a tick lands in one pipeline, whatever its keys, and ioredis then refuses the whole
 * pipeline as soon as the keys live on two masters ("All keys in the pipeline should belong to
 * the same slots allocation group"). A tick with leases on two masters failed that way, and
 * the cache fell back to loading without protection (failOpen): one loader call per process
 * instead of one in the fleet (test/integration/cache-cluster-reads.test.ts shows it).
 *
 * So on such a client the command is built as ioredis builds it for `evalsha` (utf8 replies,
 * the client's keyPrefix) and given to the Cluster's public `sendCommand`, which routes it by
 * its real keys and follows MOVED/ASK as usual; NOSCRIPT falls back to EVAL the same way.
 * ioredis' `Command` class comes from the ioredis that kunci resolves, used only when the client
 * belongs to that copy (its mixins hide the class from `client.constructor`). Any other client
 * (standalone, no auto-pipelining, another ioredis copy, node-redis) takes `runScript`.
 */
import { createRequire } from 'node:module'
import { isClusterClient, type LuaScript, type RedisClient, runScript } from '../redis/lua-script.js'
import { isNoScriptError } from '../redis/reply-error.js'

type CommandClass = new (
  name: string,
  args: readonly (string | number)[],
  options: { replyEncoding?: string; keyPrefix?: string; errorStack?: Error },
) => { promise: Promise<unknown> }

interface IoredisModule {
  Cluster?: abstract new (...args: never[]) => unknown
  Command?: CommandClass
}

let ioredis: IoredisModule | null | undefined
const routed = new WeakMap<object, boolean>()

/** Whether `client` is an auto-pipelining Cluster of the ioredis copy kunci resolves. */
function needsOwnRouting(client: RedisClient): boolean {
  let yes = routed.get(client)
  if (yes !== undefined) return yes
  if (ioredis === undefined) {
    try {
      ioredis = createRequire(import.meta.url)('ioredis') as IoredisModule
    } catch {
      ioredis = null // only node-redis installed: nothing to route around
    }
  }
  const options = (client as { options?: { enableAutoPipelining?: boolean } }).options
  yes =
    isClusterClient(client) &&
    options?.enableAutoPipelining === true &&
    typeof ioredis?.Cluster === 'function' &&
    typeof ioredis.Command === 'function' &&
    client instanceof ioredis.Cluster
  routed.set(client, yes)
  return yes
}

function send(client: RedisClient, name: 'evalsha' | 'eval', args: (string | number)[]): Promise<unknown> {
  const o = (client as { options: { keyPrefix?: string; showFriendlyErrorStack?: boolean } }).options
  const command = new ioredis!.Command!(name, args, {
    replyEncoding: 'utf8',
    keyPrefix: o.keyPrefix,
    errorStack: o.showFriendlyErrorStack ? new Error() : undefined,
  })
  ;(client as unknown as { sendCommand(c: unknown): unknown }).sendCommand(command)
  return command.promise
}

/** EVALSHA of `script`, EVAL after NOSCRIPT, routed by its keys on any client. */
export function runCacheScript(
  client: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  if (!needsOwnRouting(client)) return runScript(client, script, keys, args)
  return send(client, 'evalsha', [script.sha, keys.length, ...keys, ...args]).catch((err: unknown) => {
    if (!isNoScriptError(err)) throw err
    return send(client, 'eval', [script.source, keys.length, ...keys, ...args])
  })
}
