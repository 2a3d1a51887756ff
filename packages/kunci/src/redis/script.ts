/**
 * The one script runner of kunci (and of its users: exported from the package index). A script
 * is read and hashed once; it runs as EVALSHA, and as EVAL when the server answers NOSCRIPT
 * (after a restart, a failover or SCRIPT FLUSH), which caches it again, so the next call is an
 * EVALSHA. Where the adapter can, the script is loaded once per connection ahead of its first
 * use (SCRIPT LOAD pipelined before the EVALSHA, no round trip of its own), so even the first
 * call is one round trip. Like ioredis `lib/Script.ts`, but for every client kunci accepts, and
 * around ioredis' auto-pipeline on a Cluster, which routes EVALSHA by the SHA, not by its keys.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { InvalidOptionError } from '../errors.js'
import { type KunciClient, toRedisPort } from './client.js'
import type { Arg, RedisPort, SendOptions } from './port.js'
import { isNoScriptError } from './reply-error.js'

/** A pipeline or MULTI of ioredis (`client.pipeline()`, `client.multi()`). */
export interface IoredisPipelineLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | number | Buffer)[]): unknown
}

/**
 * A MULTI of node-redis (`client.multi()`, `cluster.multi()`), which takes raw commands with
 * `addCommand(args)`, on a cluster `addCommand(firstKey, isReadonly, args)`.
 */
export interface NodeRedisMultiLike {
  // biome-ignore lint/suspicious/noExplicitAny: the two node-redis signatures, told apart by arity
  addCommand(...args: any[]): unknown
}

export type ScriptPipeline = IoredisPipelineLike | NodeRedisMultiLike

export interface ScriptOptions {
  /** For messages and UnexpectedReplyError. @defaultValue the file name, or 'script' */
  readonly name?: string
}

export class Script {
  readonly name: string
  readonly source: string
  /** SHA1 of `source`, what EVALSHA names it by. */
  readonly sha: string

  constructor(source: string, options: ScriptOptions = {}) {
    if (typeof source !== 'string' || source.length === 0) {
      throw new InvalidOptionError('source', 'expected the Lua source of the script, a non-empty string')
    }
    this.source = source
    this.name = options.name ?? 'script'
    this.sha = createHash('sha1').update(source).digest('hex')
  }

  /**
   * Reads a `.lua` file once (use `new URL('./scripts/x.lua', import.meta.url)`); the name is
   * the file's, without `.lua`.
   */
  static fromFile(fileUrl: URL, options: ScriptOptions = {}): Script {
    const name = options.name ?? fileNameOf(fileUrl)
    return new Script(readFileSync(fileUrl, 'utf8'), { name })
  }

  /**
   * Runs the script on any client kunci accepts (ioredis `Redis`/`Cluster` 5 or 6, with or
   * without auto-pipelining; a connected node-redis v5 client or cluster): EVALSHA, EVAL on
   * NOSCRIPT. On a cluster it is routed by `keys[0]`, so all keys must share a slot.
   */
  run(
    client: KunciClient,
    keys: readonly string[],
    args: readonly (string | number)[] = [],
  ): Promise<unknown> {
    return runScript(toRedisPort(client, 'client'), this, keys, args)
  }

  /**
   * Queues the script as EVALSHA on a pipeline or MULTI and returns it, for chaining. A pipeline
   * does not fall back by itself: an entry that failed with NOSCRIPT (`isNoScriptError`) did
   * not run, and is run again with `run()` (or call `load()` first, as ioredis' own pipelines do).
   */
  queue<P extends ScriptPipeline>(
    pipeline: P,
    keys: readonly string[],
    args: readonly (string | number)[] = [],
  ): P {
    if ('evalsha' in pipeline && typeof pipeline.evalsha === 'function') {
      pipeline.evalsha(this.sha, keys.length, ...keys, ...args)
    } else if ('addCommand' in pipeline && typeof pipeline.addCommand === 'function') {
      const command = ['EVALSHA', this.sha, String(keys.length), ...keys, ...args.map(String)]
      // A cluster MULTI routes by its first key: addCommand(firstKey, isReadonly, args).
      if (pipeline.addCommand.length >= 3) pipeline.addCommand(keys[0], false, command)
      else pipeline.addCommand(command)
    } else {
      throw new InvalidOptionError('pipeline', 'expected an ioredis pipeline/multi or a node-redis multi')
    }
    return pipeline
  }

  /** SCRIPT LOAD on the node, or on every master of a cluster; resolves to the SHA. */
  async load(client: KunciClient): Promise<string> {
    const port = toRedisPort(client, 'client')
    const targets = port.cluster ? port.cluster.masters() : [port]
    if (port.cluster) await port.cluster.whenReady()
    await Promise.all(targets.map((t) => t.send('script', ['LOAD', this.source])))
    return this.sha
  }
}

function fileNameOf(url: URL): string {
  return (url.pathname.split('/').pop() ?? 'script').replace(/\.lua$/, '')
}

/** Options of one internal script call. */
export interface RunOptions {
  /** Around a client-side auto-pipeline: the caller batched the requests itself (port.ts). */
  readonly direct?: boolean
}

/** numkeys as the string the client would make of it, for the usual few keys. */
const NUM_KEYS = Array.from({ length: 17 }, (_, i) => String(i))

function scriptArgs(first: string, keys: readonly string[], args: readonly Arg[]): Arg[] {
  const out: Arg[] = new Array(keys.length + args.length + 2)
  out[0] = first
  out[1] = NUM_KEYS[keys.length] ?? String(keys.length)
  let i = 2
  for (const k of keys) out[i++] = k
  for (const a of args) out[i++] = a
  return out
}

/**
 * The runner on a port (the internals): EVALSHA, EVAL on NOSCRIPT, preloaded once per
 * connection where the adapter can. The promise form of runScriptTo (one implementation).
 */
export function runScript(
  port: RedisPort,
  script: Script,
  keys: readonly string[],
  args: readonly Arg[],
  options: RunOptions = {},
): Promise<unknown> {
  return new Promise((resolve, reject) => runScriptTo(port, script, keys, args, resolve, reject, options))
}

/**
 * The runner, reporting to callbacks instead of returning a promise: the lock nodes' hot path
 * (always `direct`) saves a promise and a microtask per call (ten per acquire+release on five
 * nodes).
 */
export function runScriptTo(
  port: RedisPort,
  script: Script,
  keys: readonly string[],
  args: readonly Arg[],
  onReply: (reply: unknown) => void,
  onError: (err: Error) => void,
  options: RunOptions = DIRECT,
): void {
  const send: SendOptions = { key: keys[0], direct: options.direct === true }
  port.preload(script.sha, script.source)
  port.send('evalsha', scriptArgs(script.sha, keys, args), send).then(onReply, (err: Error) => {
    if (!isNoScriptError(err)) return onError(err)
    port.send('eval', scriptArgs(script.source, keys, args), send).then(onReply, onError)
  })
}

const DIRECT: RunOptions = Object.freeze({ direct: true })
