import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock'
import type { Redis } from 'ioredis'
import { Mutex, RedlockMutex } from 'redis-semaphore'
// @ts-expect-error redlock 5.0.0-beta.2's "exports" map has no "types" condition (typed below)
import UntypedRedlock from 'redlock'
import { createLock, createRedlock, IoredisAdapter } from 'redlock-universal'
import { connectClients, type DriverConfig, type HeldLock, type LockDriver, quitClients } from './driver.js'

/** The part of node-redlock 5's API we use, as in its dist/index.d.ts. */
interface NodeRedlock {
  acquire(resources: string[], duration: number): Promise<HeldLock>
  on(event: 'error', listener: (err: Error) => void): unknown
}
/** node-redlock 5's class, typed. */
export const Redlock = UntypedRedlock as new (
  clients: Redis[],
  settings: { retryCount: number; retryDelay: number; retryJitter: number },
) => NodeRedlock

/**
 * node-redlock 5 beta and its sesamecare fork share an API. Both emit 'error' for every node
 * that votes against (including plain contention), and an EventEmitter without an 'error'
 * listener throws, so a no-op listener is part of correct usage (their README says the same).
 */
export async function nodeRedlockDriver(config: DriverConfig): Promise<LockDriver> {
  const clients = await connectClients(config.nodes, config.clientOptions)
  const redlock = new Redlock(clients, {
    retryCount: config.retry.count,
    retryDelay: config.retry.delayMs,
    retryJitter: config.retry.jitterMs,
  })
  redlock.on('error', () => {})
  return {
    library: 'node-redlock',
    acquire: (key) => redlock.acquire([key], config.ttlMs),
    close: () => quitClients(clients),
  }
}

export async function sesamecareDriver(config: DriverConfig): Promise<LockDriver> {
  const clients = await connectClients(config.nodes, config.clientOptions)
  const redlock = new SesameRedlock(clients, {
    retryCount: config.retry.count,
    retryDelay: config.retry.delayMs,
    retryJitter: config.retry.jitterMs,
  })
  redlock.on('error', () => {})
  return {
    library: 'sesamecare-redlock',
    acquire: (key) => redlock.acquire([key], config.ttlMs),
    close: () => quitClients(clients),
  }
}

/**
 * redlock-universal binds a lock object to one key, so one is created per acquisition (its
 * documented usage for changing keys). Adapters are created once: they cache script SHAs.
 * Single node uses `performance: 'lean'`, its documented fastest mode.
 */
export async function redlockUniversalDriver(config: DriverConfig): Promise<LockDriver> {
  const clients = await connectClients(config.nodes, config.clientOptions)
  const adapters = clients.map((c) => new IoredisAdapter(c))
  const common = { ttl: config.ttlMs, retryAttempts: config.retry.count, retryDelay: config.retry.delayMs }
  const makeLock = (key: string) =>
    adapters.length === 1
      ? createLock({ adapter: adapters[0]!, key, performance: 'lean', ...common })
      : createRedlock({ adapters, key, ...common })
  return {
    library: 'redlock-universal',
    async acquire(key) {
      const lock = makeLock(key)
      const handle = await lock.acquire()
      return { release: () => lock.release(handle) }
    },
    close: () => quitClients(clients),
  }
}

/**
 * redis-semaphore: RedlockMutex over several nodes, Mutex on one. Auto-refresh is off (a 1 ms
 * hold never needs it, and its interval timer would be pure overhead); attempts and the
 * acquire timeout give the same retry budget as the others.
 */
export async function redisSemaphoreDriver(config: DriverConfig): Promise<LockDriver> {
  const clients = await connectClients(config.nodes, config.clientOptions)
  const options = {
    lockTimeout: config.ttlMs,
    acquireTimeout: config.retry.count * config.retry.delayMs,
    acquireAttemptsLimit: config.retry.count + 1,
    retryInterval: config.retry.delayMs,
    refreshInterval: 0,
  }
  const makeMutex = (key: string) =>
    clients.length === 1 ? new Mutex(clients[0]!, key, options) : new RedlockMutex(clients, key, options)
  return {
    library: 'redis-semaphore',
    async acquire(key) {
      const mutex = makeMutex(key)
      await mutex.acquire()
      return mutex
    },
    close: () => quitClients(clients),
  }
}
