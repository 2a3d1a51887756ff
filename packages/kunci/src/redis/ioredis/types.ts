/**
 * The ioredis types kunci's public API names. Type-only: kunci never loads ioredis at runtime;
 * it works with the copy each client comes from (command.ts learns that copy's Command class).
 */
import type { Cluster, Redis } from 'ioredis'

/** A standalone client or a Cluster client of the ioredis kunci's types come from (5.x). */
export type RedisClient = Redis | Cluster

/**
 * An ioredis `Redis` or `Cluster` of any copy: the application's own ioredis 5.x or 6.x beside
 * the one kunci's types name, a workspace's, a bundle's. Two copies' classes are different types
 * to TypeScript even when they are the same code, so the public API takes the few members every
 * ioredis client has, structurally; `toRedisPort` checks at runtime that it is one.
 */
export interface AnyIoredisClient {
  readonly isCluster: boolean
  readonly status: string
  sendCommand(...args: never[]): unknown
  duplicate(...args: never[]): unknown
  evalsha(...args: never[]): unknown
}
