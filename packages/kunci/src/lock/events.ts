import { channel } from 'node:diagnostics_channel'

/**
 * Observability through `node:diagnostics_channel`: free when nobody subscribes (each publish
 * is guarded by `hasSubscribers`). Subscribe with `diagnostics_channel.subscribe(name, fn)`.
 * Message shapes are documented in docs/locks.md#observability.
 */
export const ACQUIRED_CHANNEL = 'kunci:lock:acquired'
export const FAILED_CHANNEL = 'kunci:lock:failed'
export const CONTENTION_CHANNEL = 'kunci:lock:contention'
export const NODE_ERROR_CHANNEL = 'kunci:lock:node-error'
export const LOST_CHANNEL = 'kunci:lock:lost'
export const RELEASED_CHANNEL = 'kunci:lock:released'
export const EXTENDED_CHANNEL = 'kunci:lock:extended'
export const QUARANTINE_CHANNEL = 'kunci:lock:quarantined'
export const WARNING_CHANNEL = 'kunci:lock:warning'
export const REPLICA_WAIT_CHANNEL = 'kunci:lock:replica-wait'

export const LOCK_CHANNELS = Object.freeze([
  ACQUIRED_CHANNEL,
  FAILED_CHANNEL,
  CONTENTION_CHANNEL,
  NODE_ERROR_CHANNEL,
  LOST_CHANNEL,
  RELEASED_CHANNEL,
  EXTENDED_CHANNEL,
  QUARANTINE_CHANNEL,
  WARNING_CHANNEL,
  REPLICA_WAIT_CHANNEL,
])

const channels = new Map(LOCK_CHANNELS.map((name) => [name, channel(name)]))

export function publishEvent(name: string, message: object): void {
  const ch = channels.get(name)
  if (ch?.hasSubscribers) ch.publish(message)
}

/** For hot paths: check before building the message object at all. */
export function hasSubscribers(name: string): boolean {
  return channels.get(name)?.hasSubscribers ?? false
}
