import { Redis, type RedisOptions } from 'ioredis'
import type { RetrySettings } from './settings.js'

export const LIBRARIES = [
  'kunci',
  'node-redlock',
  'sesamecare-redlock',
  'redlock-universal',
  'redis-semaphore',
] as const
export type Library = (typeof LIBRARIES)[number]

export interface NodeAddress {
  host: string
  port: number
}

export interface HeldLock {
  release(): Promise<unknown>
}

/**
 * The one shape every library is driven through. A driver owns its own ioredis connections, so
 * one library's socket buffers and pipelines never sit in front of another's.
 */
export interface LockDriver {
  readonly library: Library
  acquire(key: string): Promise<HeldLock>
  close(): Promise<void>
}

export interface DriverConfig {
  /** One address: a single-node lock; several: Redlock over independent nodes. */
  nodes: readonly NodeAddress[]
  ttlMs: number
  retry: RetrySettings
  /** Extra ioredis options for every library's connections (e.g. enableAutoPipelining). */
  clientOptions?: RedisOptions
}

export type DriverFactory = (config: DriverConfig) => Promise<LockDriver>

/** Same client options for every library; connected before the driver is handed out. */
export async function connectClients(
  nodes: readonly NodeAddress[],
  options: RedisOptions = {},
): Promise<Redis[]> {
  const clients = nodes.map((n) => new Redis({ ...options, host: n.host, port: n.port, lazyConnect: true }))
  await Promise.all(clients.map((c) => c.connect()))
  return clients
}

export async function quitClients(clients: readonly Redis[]): Promise<void> {
  await Promise.allSettled(clients.map((c) => c.quit()))
}
