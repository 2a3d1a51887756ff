import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Cluster, Redis } from 'ioredis'
import { autoPipelineBypass, type SendCommand } from './ioredis-command.js'
import { isNoScriptError } from './reply-error.js'

/** A standalone client or a Cluster client: kunci accepts both wherever one node is meant. */
export type RedisClient = Redis | Cluster

/**
 * Cluster or standalone, by the `isCluster` flag ioredis sets on both classes rather than by
 * `instanceof`: a user's ioredis may be another copy or major version than the one we import.
 */
export function isClusterClient(client: RedisClient): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true
}

/** A Lua script kept in a `.lua` file beside its module, hashed once at load time. */
export interface LuaScript {
  readonly name: string
  readonly source: string
  readonly sha: string
  /** For batched scripts: how many reply elements each request gets (a flat array). @defaultValue 1 */
  readonly replyWidth: number
  /**
   * For a lean single-request script: the batched script that serves several such requests in
   * one call, and how to turn one request's arguments into that script's per-request arguments.
   * A request alone in its tick runs this script with its own arguments (no batch prefix).
   */
  readonly batchAs?: BatchForm
  /**
   * For a lean script: turns its reply into the value the batched script gives one request
   * (lean scripts answer with a bare integer where they can: no Lua table to build, no array
   * to parse). `undefined` means the reply is malformed.
   */
  readonly decodeLone?: (reply: unknown) => unknown
}

export interface BatchForm {
  readonly script: LuaScript
  pack(args: readonly (string | number)[]): readonly (string | number)[]
}

/**
 * Loads `fileUrl` (use `new URL('./scripts/x.lua', import.meta.url)`). The build copies the
 * `.lua` files next to the compiled JS, so the same URL works from `src/` and `dist/`.
 */
export function loadScript(
  fileUrl: URL,
  options: { replyWidth?: number; batchAs?: BatchForm; decodeLone?: (reply: unknown) => unknown } = {},
): LuaScript {
  const source = readFileSync(fileUrl, 'utf8')
  const name = fileUrl.pathname
    .split('/')
    .pop()!
    .replace(/\.lua$/, '')
  const sha = createHash('sha1').update(source).digest('hex')
  const script: LuaScript = { name, source, sha, replyWidth: options.replyWidth ?? 1 }
  return Object.freeze({ ...script, ...options, replyWidth: script.replyWidth })
}

/**
 * Runs a script with EVALSHA and falls back to EVAL when the server answers NOSCRIPT
 * (after a restart, a failover or SCRIPT FLUSH). EVAL also caches the script, so the next
 * call is an EVALSHA again. One round trip in the common case.
 */
export function runScript(
  client: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<unknown> {
  // Not async/await: this sits on every lock operation, and each await is another promise.
  const send = ownSender(client, false)
  if (send !== null) {
    return send('evalsha', [script.sha, keys.length, ...keys, ...args]).catch((err: unknown) => {
      if (!isNoScriptError(err)) throw err
      return send('eval', [script.source, keys.length, ...keys, ...args])
    })
  }
  return client.evalsha(script.sha, keys.length, ...keys, ...args).catch((err: unknown) => {
    if (!isNoScriptError(err)) throw err
    return client.eval(script.source, keys.length, ...keys, ...args)
  })
}

/**
 * runScript for the lock nodes' hot path: the same EVALSHA with the EVAL fallback, reporting to
 * callbacks instead of returning a promise, which saves a promise and a microtask per call
 * (ten per acquire+release on five nodes).
 */
export function runScriptTo(
  client: RedisClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly (string | number)[],
  onReply: (reply: unknown) => void,
  onError: (err: Error) => void,
): void {
  const send = ownSender(client, true)
  if (send !== null) {
    send('evalsha', [script.sha, keys.length, ...keys, ...args]).then(onReply, (err: Error) => {
      if (!isNoScriptError(err)) return onError(err)
      send('eval', [script.source, keys.length, ...keys, ...args]).then(onReply, onError)
    })
    return
  }
  client.evalsha(script.sha, keys.length, ...keys, ...args).then(onReply, (err: Error) => {
    if (!isNoScriptError(err)) return onError(err)
    client.eval(script.source, keys.length, ...keys, ...args).then(onReply, onError)
  })
}

/**
 * How kunci sends its script calls on an ioredis client with `enableAutoPipelining`: around the
 * auto-pipeline, as one command given to the client's public `sendCommand` (ioredis-command.ts).
 *
 * - **Cluster: correctness.** ioredis files an auto-pipelined command under the slot of its first
 *   argument, taken as a key. For EVALSHA/EVAL that is the SHA or the source, not a key: every
 *   script call of a tick lands in one pipeline whatever its keys, and ioredis refuses the whole
 *   pipeline as soon as they live on two masters ("All keys in the pipeline should belong to the
 *   same slots allocation group"). Locks and cache leases on two masters in one tick failed so.
 *   `sendCommand` routes by the real keys and follows MOVED/ASK as usual.
 * - **Standalone, lock path only (`direct`): speed.** The lock path already packs one tick's
 *   requests into one script call per node; the auto-pipeline only wrapped it in a Pipeline, a
 *   per-tick queue and a `nextTick` per reply, ~30 % more client CPU per acquire+release at
 *   concurrency 1 (bench/RESULTS.md). The cache's standalone script calls keep the auto-pipeline,
 *   which merges a tick's calls into one write.
 *
 * Clients of another ioredis copy or major version, and node-redis adapters, keep their
 * ordinary methods (on such a Cluster with auto-pipelining the ioredis bug above remains:
 * docs/locks.md says to turn auto-pipelining off there).
 */
function ownSender(client: RedisClient, direct: boolean): SendCommand | null {
  return isClusterClient(client) || direct ? autoPipelineBypass(client) : null
}
