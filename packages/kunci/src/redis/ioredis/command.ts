/**
 * Sending one command around ioredis' auto-pipeline. The command is built the way ioredis' own
 * methods build it (utf8 or Buffer replies, the client's keyPrefix, the friendly error stack if
 * asked for) and given to the client's public `sendCommand`. ioredis' `Command` class comes from
 * the ioredis that kunci resolves, and is used only for clients of that same copy (ioredis'
 * mixins hide the class from `client.constructor`); for any other client (another copy or major
 * version) `commandSender` says no, and the adapter uses the client's public `call`.
 */
import { createRequire } from 'node:module'
import type { Arg } from '../port.js'

type CommandClass = new (
  name: string,
  args: readonly Arg[],
  options: { replyEncoding?: string | null; keyPrefix?: string; errorStack?: Error },
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

export type SendCommand = (name: string, args: readonly Arg[], binary: boolean) => Promise<unknown>

/** The public members of an ioredis `Redis` or `Cluster` the sender reads. */
export interface CommandClient {
  readonly options: { keyPrefix?: string; showFriendlyErrorStack?: boolean; enableAutoPipelining?: boolean }
  sendCommand(command: never): unknown
}

/** A sender of raw commands for `client` (a Redis or Cluster of kunci's ioredis), or undefined. */
export function commandSender(client: CommandClient): SendCommand | undefined {
  const m = resolved()
  if (m === null) return undefined
  const ofCopy =
    (typeof m.Redis === 'function' && client instanceof m.Redis) ||
    (typeof m.Cluster === 'function' && client instanceof m.Cluster)
  if (!ofCopy) return undefined
  const Command = m.Command!
  const send = client.sendCommand.bind(client) as (command: unknown) => unknown
  return (name, args, binary) => {
    const o = client.options
    const command = new Command(name, args, {
      replyEncoding: binary ? null : 'utf8',
      keyPrefix: o.keyPrefix,
      errorStack: o.showFriendlyErrorStack ? new Error() : undefined,
    })
    send(command)
    return command.promise
  }
}
