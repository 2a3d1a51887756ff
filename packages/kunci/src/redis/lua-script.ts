import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import type { Cluster, Redis } from 'ioredis'
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
  const direct = directSender(client)
  const sent = direct
    ? direct(client, 'evalsha', [script.sha, keys.length, ...keys, ...args])
    : client.evalsha(script.sha, keys.length, ...keys, ...args)
  sent.then(onReply, (err: Error) => {
    if (!isNoScriptError(err)) return onError(err)
    client.eval(script.source, keys.length, ...keys, ...args).then(onReply, onError)
  })
}

type CommandClass = new (
  name: string,
  args: readonly (string | number)[],
  options: { replyEncoding?: string; keyPrefix?: string; errorStack?: Error },
) => { promise: Promise<unknown> }
type DirectSend = (client: RedisClient, name: string, args: readonly (string | number)[]) => Promise<unknown>

const directSenders = new WeakMap<object, DirectSend | null>()
let ioredisModule: { Redis?: unknown; Command?: CommandClass } | null | undefined

/**
 * A way around ioredis' auto-pipelining for the lock path, on a standalone client that has it on.
 * The lock path already packs the requests of one tick into one script call per node, so the
 * auto-pipeline only wraps that single call in a Pipeline object, a queue per tick and a
 * `process.nextTick` per reply: at concurrency 1 that cost ~20 % more client CPU per
 * acquire+release and ~20 % fewer operations per second (bench/RESULTS.md, issue 9). The command
 * is built the way ioredis builds it for `evalsha` (utf8 replies, the client's keyPrefix) and
 * sent with the public `sendCommand`. ioredis' `Command` class is taken from the ioredis that
 * kunci resolves, and used only if the client is an instance of that same copy (ioredis'
 * mixins hide the class from `client.constructor`). Anything else (another copy or major
 * version, a node-redis adapter) and Cluster clients, whose auto-pipeline groups the calls of
 * several slots bound for one node into one write (which does help), keep the ordinary call.
 */
function directSender(client: RedisClient): DirectSend | null {
  let send = directSenders.get(client)
  if (send !== undefined) return send
  send = null
  if (ioredisModule === undefined) {
    try {
      ioredisModule = createRequire(import.meta.url)('ioredis') as typeof ioredisModule
    } catch {
      ioredisModule = null
    }
  }
  const Redis = ioredisModule?.Redis
  const Command = ioredisModule?.Command
  const options = (client as { options?: { enableAutoPipelining?: boolean } }).options
  if (
    !isClusterClient(client) &&
    options?.enableAutoPipelining === true &&
    typeof Redis === 'function' &&
    typeof Command === 'function' &&
    client instanceof Redis
  ) {
    send = (c, name, args) => {
      const o = (c as Redis).options
      const command = new Command(name, args, {
        replyEncoding: 'utf8',
        keyPrefix: o.keyPrefix,
        errorStack: o.showFriendlyErrorStack ? new Error() : undefined,
      })
      ;(c as Redis).sendCommand(command as never)
      return command.promise
    }
  }
  directSenders.set(client, send)
  return send
}
