/**
 * The ioredis types kunci's public API names. Type-only: kunci never loads ioredis at runtime
 * except in this folder, to reuse its Command class for clients of the same copy (command.ts).
 */
import type { Cluster, Redis } from 'ioredis'

/** A standalone client or a Cluster client of ioredis 5 or 6. */
export type RedisClient = Redis | Cluster
