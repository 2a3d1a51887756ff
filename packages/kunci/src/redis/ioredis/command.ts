/**
 * Sending one command around ioredis' auto-pipeline. The command is built the way ioredis' own
 * methods build it (utf8 or Buffer replies, the client's keyPrefix, the friendly error stack if
 * asked for) and given to the client's public `sendCommand`.
 *
 * The `Command` class must be the one of the client's own ioredis copy (its `sendCommand` reads
 * the class's private state), and an application's client may come from another copy than the
 * ioredis kunci resolves (an app on 5.11 beside kunci's 5.9, ioredis 6, a workspace, a
 * bundler): before, such clients took `call`, and L2 hits ran at half speed. The class is learned
 * from the client itself, once: its public `call('info')` builds a Command and hands it to
 * `sendCommand` synchronously (INFO never rides the auto-pipeline, in 5.x and 6.x), and for that
 * one call `sendCommand` is shadowed on the instance, so the Command is caught, not sent.
 * (`client.constructor` does not help: ioredis' mixins overwrite it with EventEmitter.)
 */
import type { Arg } from '../port.js'

type CommandClass = new (
  name: string,
  args: readonly Arg[],
  options: { replyEncoding?: string | null; keyPrefix?: string; errorStack?: Error },
) => { promise: Promise<unknown> }

const commandClasses = new WeakMap<object, CommandClass | null>()

/** The Command class of the client's ioredis copy, or null when it cannot be learned safely. */
function commandClassOf(client: object): CommandClass | null {
  const known = commandClasses.get(client)
  if (known !== undefined) return known
  const target = client as { call?: (...args: unknown[]) => unknown; sendCommand?: unknown }
  let caught: { name?: unknown; promise?: unknown } | undefined
  let found: CommandClass | null = null
  if (typeof target.call === 'function' && typeof target.sendCommand === 'function') {
    const own = Object.getOwnPropertyDescriptor(client, 'sendCommand')
    try {
      Object.defineProperty(client, 'sendCommand', {
        configurable: true,
        writable: true,
        value: (command: { name?: unknown; promise?: unknown }) => {
          caught = command
          return Promise.resolve()
        },
      })
      target.call('info')
    } catch {
      caught = undefined
    } finally {
      if (own !== undefined) Object.defineProperty(client, 'sendCommand', own)
      else delete target.sendCommand
    }
    const Class = (caught as { constructor?: unknown } | undefined)?.constructor
    if (
      typeof Class === 'function' &&
      caught?.name === 'info' &&
      typeof (caught.promise as Promise<unknown> | undefined)?.then === 'function'
    ) {
      found = Class as CommandClass
    }
  }
  commandClasses.set(client, found)
  return found
}

export type SendCommand = (name: string, args: readonly Arg[], binary: boolean) => Promise<unknown>

/** The public members of an ioredis `Redis` or `Cluster` the sender reads. */
export interface CommandClient {
  readonly options: { keyPrefix?: string; showFriendlyErrorStack?: boolean; enableAutoPipelining?: boolean }
  sendCommand(command: never): unknown
}

/** A sender of raw commands for `client` (an ioredis Redis or Cluster of any copy), or undefined. */
export function commandSender(client: CommandClient): SendCommand | undefined {
  const Command = commandClassOf(client)
  if (Command === null) return undefined
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
