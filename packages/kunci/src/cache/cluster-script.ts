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
 * So on such a client the command goes to the Cluster's public `sendCommand` (ioredis-command.ts),
 * which routes it by its real keys and follows MOVED/ASK as usual; NOSCRIPT falls back to EVAL
 * the same way. Any other client (standalone, no auto-pipelining, another ioredis copy,
 * node-redis) takes `runScript`.
 */
import { isClusterClient, type LuaScript, type RedisClient, runScript } from '../redis/lua-script.js'
import { isNoScriptError } from '../redis/reply-error.js'
import { commandSender, type SendCommand } from './ioredis-command.js'

const senders = new WeakMap<object, SendCommand | null>()

/** The raw sender for an auto-pipelining Cluster of kunci's ioredis; null for any other client. */
function ownRouting(client: RedisClient): SendCommand | null {
  let send = senders.get(client)
  if (send !== undefined) return send
  const options = (client as { options?: { enableAutoPipelining?: boolean } }).options
  send =
    isClusterClient(client) && options?.enableAutoPipelining === true ? (commandSender(client) ?? null) : null
  senders.set(client, send)
  return send
}

/** EVALSHA of `script`, EVAL after NOSCRIPT, routed by its keys on any client. */
export function runCacheScript(
  client: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  const send = ownRouting(client)
  if (send === null) return runScript(client, script, keys, args)
  return send('evalsha', [script.sha, keys.length, ...keys, ...args]).catch((err: unknown) => {
    if (!isNoScriptError(err)) throw err
    return send('eval', [script.source, keys.length, ...keys, ...args])
  })
}
