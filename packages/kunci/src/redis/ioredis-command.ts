/**
 * Sending one command around ioredis' auto-pipeline: for the lock and cache scripts
 * (lua-script.ts) and the cache's hits (cache/value-reader.ts). The command is built the way ioredis' own methods build it (utf8 replies,
 * the client's keyPrefix, the friendly error stack if asked for) and given to the client's public
 * `sendCommand`. ioredis' `Command` class comes from the ioredis that kunci resolves, and is used
 * only for clients of that same copy (ioredis' mixins hide the class from `client.constructor`);
 * for any other client (another copy or major version, node-redis) `commandSender` says no and
 * the caller uses the client's ordinary method.
 */
import { createRequire } from 'node:module'

type CommandClass = new (
  name: string,
  args: readonly (string | number)[],
  options: { replyEncoding?: string; keyPrefix?: string; errorStack?: Error },
) => { promise: Promise<unknown> }

type AnyClass = abstract new (...args: never[]) => unknown

interface IoredisModule {
  Redis?: AnyClass
  Cluster?: AnyClass
  Command?: CommandClass
}

let ioredis: IoredisModule | null | undefined

function resolved(): IoredisModule | null {
  if (ioredis === undefined) {
    try {
      ioredis = createRequire(import.meta.url)('ioredis') as IoredisModule
      if (typeof ioredis?.Command !== 'function') ioredis = null
    } catch {
      ioredis = null // only node-redis installed
    }
  }
  return ioredis
}

export type SendCommand = (name: string, args: (string | number)[]) => Promise<unknown>

interface CommandClient {
  readonly options: { keyPrefix?: string; showFriendlyErrorStack?: boolean; enableAutoPipelining?: boolean }
  sendCommand(command: unknown): unknown
}

/** A sender of raw commands for `client` (a Redis or Cluster of kunci's ioredis), or undefined. */
export function commandSender(client: unknown): SendCommand | undefined {
  const m = resolved()
  if (m === null) return undefined
  const ofCopy =
    (typeof m.Redis === 'function' && client instanceof m.Redis) ||
    (typeof m.Cluster === 'function' && client instanceof m.Cluster)
  if (!ofCopy) return undefined
  const Command = m.Command!
  const c = client as CommandClient
  return (name, args) => {
    const o = c.options
    const command = new Command(name, args, {
      replyEncoding: 'utf8',
      keyPrefix: o.keyPrefix,
      errorStack: o.showFriendlyErrorStack ? new Error() : undefined,
    })
    c.sendCommand(command)
    return command.promise
  }
}

const pipelineBypasses = new WeakMap<object, SendCommand | null>()

/**
 * `commandSender(client)` if the client has `enableAutoPipelining` on, else null; decided once
 * per client. Where kunci goes around the auto-pipeline (lua-script.ts, cache/value-reader.ts).
 */
export function autoPipelineBypass(client: object): SendCommand | null {
  let send = pipelineBypasses.get(client)
  if (send === undefined) {
    const on = (client as Partial<CommandClient>).options?.enableAutoPipelining === true
    send = on ? (commandSender(client) ?? null) : null
    pipelineBypasses.set(client, send)
  }
  return send
}
