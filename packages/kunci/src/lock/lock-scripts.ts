// The lock's Lua scripts (scripts/*.lua) as the node links call them: the lean one-resource
// scripts and the batched forms a tick's requests are packed into.
import { loadScript } from '../redis/lua-script.js'

/** acquire.lua's per-request status (the first of its three reply values). */
export const Acquire = Object.freeze({
  /** Held by another token; the second value is its remaining TTL. */
  HELD: 0,
  /** Granted with the proposed fence. */
  GRANTED: 1,
  /** The proposal was not above the fence stored there (the second value). */
  FENCED: 2,
  /** A hand-over gave way to other processes' waiters: prev released. */
  YIELDED: 3,
} as const)
export type AcquireStatus = (typeof Acquire)[keyof typeof Acquire]

export const ACQUIRE = loadScript(new URL('./scripts/acquire.lua', import.meta.url), { replyWidth: 3 })
export const RELEASE = loadScript(new URL('./scripts/release.lua', import.meta.url))
/**
 * The common case (one resource, no hand-over) in lean scripts; when several such requests
 * share a tick, the node link packs them into ACQUIRE / RELEASE (one script call per node).
 */
export const ACQUIRE_ONE = loadScript(new URL('./scripts/acquire-one.lua', import.meta.url), {
  replyWidth: 3,
  batchAs: {
    script: ACQUIRE,
    // token, ttl, fence[, waiter id, since, queued] → acquire.lua's 6 values per request.
    pack: (a) => [a[0]!, a[1]!, a[2]!, '1', '', a.length > 3 ? `${a[3]}|${a[4]}|${a[5]}` : ''],
  },
  // fence (granted), -(pttl + 3) (held) or the fenced triple: see acquire-one.lua.
  decodeLone: (r) =>
    typeof r === 'number'
      ? r > 0
        ? [Acquire.GRANTED, r, 0]
        : [Acquire.HELD, -r - 3, 0]
      : Array.isArray(r)
        ? r
        : undefined,
})
export const RELEASE_ONE = loadScript(new URL('./scripts/release-one.lua', import.meta.url), {
  batchAs: { script: RELEASE, pack: (a) => [a[0]!, '1'] },
  decodeLone: (r) => (typeof r === 'number' ? r : undefined),
})
export const EXTEND = loadScript(new URL('./scripts/extend.lua', import.meta.url))
export const UNQUEUE = loadScript(new URL('./scripts/unqueue.lua', import.meta.url))
