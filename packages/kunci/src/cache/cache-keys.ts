/**
 * Every Redis key and channel the cache uses is built here.
 *
 * Entry `K` of a cache with prefix `P` (P has no braces, checked by the options resolver):
 *   {P:K}:v   the value (header + payload), PX = ttl + grace
 *   {P:K}:l   the lease: token of the one process allowed to run the loader, PX = leaseTtlMs
 * Both keys share the text up to the first `}` after the leading `{`, and that text is never
 * empty (it starts with P), so they always hash to one slot, whatever K contains. Each entry
 * gets its own slot: entries spread over the whole cluster instead of piling on one master.
 *
 *   P:bus     pub/sub channel: "this key changed" (L1 invalidation and waking waiters)
 */
import { escapeGlob } from '../cluster/scan.js'

export interface EntryKeys {
  readonly value: string
  readonly lease: string
}

/** The value key alone: all a hit needs. */
export function valueKey(prefix: string, key: string): string {
  return '{' + prefix + ':' + key + '}:v'
}

export function entryKeys(prefix: string, key: string): EntryKeys {
  const tag = '{' + prefix + ':' + key + '}'
  return { value: tag + ':v', lease: tag + ':l' }
}

export function busChannel(prefix: string): string {
  return prefix + ':bus'
}

/** SCAN MATCH pattern for the value and lease keys of every entry whose key starts with `keyPrefix`. */
export function entryPattern(prefix: string, keyPrefix: string): string {
  return '{' + escapeGlob(prefix + ':' + keyPrefix) + '*'
}
