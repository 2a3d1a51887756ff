/**
 * Cross-process stampede protection: the lease scripts, their reply mappers, the lease renewal
 * while a loader runs, and the XFetch early-refresh test.
 *
 * The protocol, per key (all in the key's slot):
 *   1. A reader that finds no fresh value runs cache-fetch: atomically it reads the entry and,
 *      if it is stale or absent, sets the lease with NX. Exactly one caller gets LEASED.
 *   2. The holder runs the loader, renewing the lease every third of its TTL, then runs
 *      cache-write (only if the lease is still its own), which stores the value, deletes the
 *      lease and PUBLISHes the key on the bus. On failure it runs cache-release instead.
 *   3. Everybody else got HELD: they serve the stale entry if one is within grace, otherwise
 *      they wait for the bus message or the poll interval, and run cache-fetch again. If the
 *      holder died, its lease expires and the next cache-fetch hands the lease to a waiter.
 */
import { UnexpectedReplyError } from '../errors.js'
import { loadScript } from '../redis/lua-script.js'
import type { RedisPort } from '../redis/port.js'
import { runScript } from '../redis/script.js'
import type { EntryKeys } from './cache-keys.js'

const FETCH = loadScript(new URL('./scripts/cache-fetch.lua', import.meta.url))
const WRITE = loadScript(new URL('./scripts/cache-write.lua', import.meta.url))
const RELEASE = loadScript(new URL('./scripts/cache-release.lua', import.meta.url))
const EXTEND = loadScript(new URL('./scripts/cache-extend.lua', import.meta.url))
const DELETE = loadScript(new URL('./scripts/cache-delete.lua', import.meta.url))

/** Scripts by name, for tests that check headers against the calls. */
export const CACHE_SCRIPTS = Object.freeze({ FETCH, WRITE, RELEASE, EXTEND, DELETE })

export type FetchStatus = 'fresh' | 'leased' | 'held'

export interface FetchReply {
  readonly status: FetchStatus
  /** The encoded entry, fresh for `fresh`, stale (or undefined) otherwise. */
  readonly raw: string | undefined
}

const FETCH_STATUS: readonly FetchStatus[] = ['fresh', 'leased', 'held']

/** cache-fetch; `seenExpiresAt` is '' for a read that needs a value. */
export async function fetchOrLease(
  client: RedisPort,
  keys: EntryKeys,
  token: string,
  leaseTtlMs: number,
  seenExpiresAt: string,
): Promise<FetchReply> {
  const reply = await runScript(
    client,
    FETCH,
    [keys.value, keys.lease],
    [Date.now(), token, leaseTtlMs, seenExpiresAt],
  )
  if (Array.isArray(reply) && typeof reply[0] === 'number') {
    const status = FETCH_STATUS[reply[0]]
    const raw: unknown = reply[1]
    if (status !== undefined && (typeof raw === 'string' || raw === null || raw === undefined)) {
      return { status, raw: raw ?? undefined }
    }
  }
  throw new UnexpectedReplyError(FETCH.name, reply)
}

/** cache-write; resolves `false` when the lease was no longer `token`'s and nothing was written. */
export async function writeEntry(
  client: RedisPort,
  keys: EntryKeys,
  raw: string,
  physicalTtlMs: number,
  token: string,
  channel: string,
  message: string,
): Promise<boolean> {
  const reply = await runScript(
    client,
    WRITE,
    [keys.value, keys.lease],
    [raw, physicalTtlMs, token, channel, message],
  )
  return expectFlag(WRITE.name, reply)
}

export async function releaseLease(
  client: RedisPort,
  keys: EntryKeys,
  token: string,
  channel: string,
  message: string,
): Promise<boolean> {
  return expectFlag(RELEASE.name, await runScript(client, RELEASE, [keys.lease], [token, channel, message]))
}

export async function extendLease(
  client: RedisPort,
  keys: EntryKeys,
  token: string,
  leaseTtlMs: number,
): Promise<boolean> {
  return expectFlag(EXTEND.name, await runScript(client, EXTEND, [keys.lease], [token, leaseTtlMs]))
}

/** cache-delete; resolves whether a value existed. */
export async function deleteEntry(
  client: RedisPort,
  keys: EntryKeys,
  channel: string,
  message: string,
): Promise<boolean> {
  return expectFlag(
    DELETE.name,
    await runScript(client, DELETE, [keys.value, keys.lease], [channel, message]),
  )
}

function expectFlag(script: string, reply: unknown): boolean {
  if (reply === 1) return true
  if (reply === 0) return false
  throw new UnexpectedReplyError(script, reply)
}

/**
 * Renews the lease every third of its TTL while a loader runs, for at most `maxMs` (the
 * hard timeout: a loader still running after that is abandoned, and its lease may lapse so
 * another process can try). Returns a function that stops the renewal.
 *
 * A failed or refused renewal is reported once through `onLost`; the loader is not cancelled,
 * but its write will be refused if another process has taken the lease meanwhile.
 */
export function keepLease(
  client: RedisPort,
  keys: EntryKeys,
  token: string,
  leaseTtlMs: number,
  maxMs: number,
  onLost: (error: Error | undefined) => void,
): () => void {
  const started = Date.now()
  let renewed = started
  let stopped = false
  let reported = false
  const timer = setInterval(
    () => {
      if (Date.now() - started >= maxMs) return stop()
      extendLease(client, keys, token, leaseTtlMs).then(
        (ok) => {
          if (ok) renewed = Date.now()
          else if (!stopped) {
            stop()
            reported = true
            onLost(undefined)
          }
        },
        (err: Error) => {
          // A failed renewal is not yet a lost lease: it lives a full TTL after the last
          // successful one, so keep trying and report only once that time has passed.
          if (!stopped && !reported && Date.now() - renewed >= leaseTtlMs) {
            reported = true
            onLost(err)
          }
        },
      )
    },
    Math.max(10, Math.floor(leaseTtlMs / 3)),
  )
  timer.unref()
  function stop(): void {
    stopped = true
    clearInterval(timer)
  }
  return stop
}

/**
 * XFetch (Vattani, Chierichetti, Lowenstein 2015): refresh early when
 * `now − δ·β·ln(rand) ≥ expiresAt`. −ln(rand) is exponentially distributed, so the chance of an
 * early refresh rises smoothly as expiry approaches and with the cost δ of a recompute; among
 * many readers one refreshes ahead of time and the rest never see the value expire.
 */
export function shouldRefreshEarly(
  now: number,
  expiresAt: number,
  deltaMs: number,
  beta: number,
  random?: number,
): boolean {
  if (beta <= 0 || deltaMs <= 0) return false
  // Math.random() is a multiple of 2^-53, so −ln(rand) ≤ 53·ln 2 < 37: further from expiry than
  // that many δ·β no draw can trigger (a draw of exactly 0, chance 2^-53, is ignored), and the
  // hit skips the random number and the logarithm.
  if (expiresAt - now > 37 * deltaMs * beta) return false
  return now - deltaMs * beta * Math.log(random ?? Math.random()) >= expiresAt
}
