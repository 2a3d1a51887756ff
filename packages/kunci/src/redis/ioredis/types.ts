/**
 * The ioredis types kunci's public API names. Type-only: kunci never loads ioredis at runtime;
 * it works with the copy each client comes from (command.ts learns that copy's Command class).
 */
import type { Cluster, Redis } from 'ioredis'

/** A standalone client or a Cluster client of ioredis 5 or 6. */
export type RedisClient = Redis | Cluster
