import { InvalidOptionError, UnexpectedReplyError } from '../errors.js'
import { type KunciClient, toRedisPort } from '../redis/client.js'
import { loadScript } from '../redis/lua-script.js'
import { runScript } from '../redis/script.js'

const FENCED_WRITE = loadScript(new URL('./scripts/fenced-write.lua', import.meta.url))

export interface FencedWriteResult {
  /** False when a holder with a higher fencing token has written already: the caller is stale. */
  readonly applied: boolean
  /** The record's fence after the call: ours when applied, the newer holder's otherwise. */
  readonly fence: number
}

/**
 * Writes `value` to the hash `key` only if `fence` is above the fence stored with it, in one
 * atomic script on the record's node. Use the lock's `fence`; a `false` `applied` means this
 * process lost the lock at some point and must not assume its write happened.
 */
export async function fencedWrite(
  given: KunciClient,
  options: { key: string; fence: number; value: string },
): Promise<FencedWriteResult> {
  const { key, fence, value } = options
  if (typeof key !== 'string' || key.length === 0)
    throw new InvalidOptionError('key', 'expected a non-empty string')
  if (!Number.isSafeInteger(fence) || fence < 1)
    throw new InvalidOptionError('fence', 'expected a lock fencing token')
  if (typeof value !== 'string')
    throw new InvalidOptionError('value', 'expected a string (serialise it first)')
  const reply = await runScript(toRedisPort(given, 'client'), FENCED_WRITE, [key], [fence, value])
  if (!Array.isArray(reply) || reply.length !== 2) throw new UnexpectedReplyError('fenced-write', reply)
  return { applied: reply[0] === 1, fence: Number(reply[1]) }
}

/** Reads a record written by `fencedWrite`; `undefined` when it does not exist. */
export async function readFenced(
  given: KunciClient,
  key: string,
): Promise<{ value: string; fence: number } | undefined> {
  const reply = await toRedisPort(given, 'client').send('hmget', [key, 'value', 'fence'], { key })
  if (!Array.isArray(reply) || reply.length !== 2) throw new UnexpectedReplyError('hmget', reply)
  const [value, fence] = reply as [string | null, string | null]
  if (value === null || value === undefined) return undefined
  return { value, fence: Number(fence ?? 0) }
}
