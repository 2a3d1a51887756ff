/**
 * kunci: correct distributed locks (Redlock with fencing tokens) and caching on Redis.
 * Explicit named exports only; everything not listed here is internal.
 */

// cache
export type { GetOrSetOptions, SetOptions } from './cache/cache.js'
export { Cache } from './cache/cache.js'
export type { CacheEventName, CacheEvents, CacheListener, CacheTier } from './cache/cache-events.js'
export type { CacheOptions, EntryOptions } from './cache/cache-options.js'
export { DEFAULT_CACHE_OPTIONS, DEFAULT_ENTRY_OPTIONS } from './cache/cache-options.js'
export type { Loader, LoaderContext } from './cache/read-through.js'
export type { Serializer } from './cache/serializer.js'
export { jsonSerializer } from './cache/serializer.js'
// cluster
export { assertValidTag, groupBySlot, KEY_PART_SEPARATOR, sameSlot, taggedKey } from './cluster/hash-tag.js'
export type { DeleteByPatternOptions, ScanOptions } from './cluster/scan.js'
export {
  DEFAULT_DELETE_BY_PATTERN_OPTIONS,
  DEFAULT_SCAN_OPTIONS,
  deleteByPattern,
  escapeGlob,
  MAX_SCAN_COUNT,
  resolveDeleteByPatternOptions,
  resolveScanOptions,
  scanKeys,
} from './cluster/scan.js'
export { hashTag, keySlot, SLOT_COUNT } from './cluster/slot.js'
// errors
export type { ErrorCode, NodeVote, NodeVoteStatus } from './errors.js'
export {
  AcquireAbortedError,
  CacheLoaderError,
  CacheLoaderTimeoutError,
  CacheSerializeError,
  CacheUnavailableError,
  ClosedError,
  ERROR_CODES,
  InvalidOptionError,
  KunciError,
  LockLostError,
  LockNotAcquiredError,
  LockUnavailableError,
  MaxHoldExceededError,
  UnexpectedReplyError,
} from './errors.js'
export { LOCK_CHANNELS } from './lock/events.js'
export type { FencedUpdateOptions, SqlStatement } from './lock/fenced-sql.js'
export { fencedUpdate } from './lock/fenced-sql.js'
export type { FencedWriteResult } from './lock/fenced-write.js'
export { fencedWrite, readFenced } from './lock/fenced-write.js'
// locks
export type { LockState } from './lock/lock.js'
export { Lock } from './lock/lock.js'
export type {
  AcquireOptions,
  FirstContact,
  KunciWarning,
  LockManagerOptions,
  PersistenceProfile,
  UsingOptions,
  WarningCode,
} from './lock/lock-options.js'
export { DEFAULT_LOCK_OPTIONS, WARNING_CODES } from './lock/lock-options.js'
export type { RedisLockOptions, WaitForReplicasOptions } from './lock/redis-lock.js'
export { RedisLock } from './lock/redis-lock.js'
export type { RedlockOptions } from './lock/redlock.js'
export { Redlock } from './lock/redlock.js'
export type {
  AnyIoredisClient,
  KunciClient,
  NodeRedisClient,
  NodeRedisCluster,
  RedisClient,
} from './redis/client.js'
export { isNoScriptError } from './redis/reply-error.js'
export type {
  IoredisPipelineLike,
  NodeRedisMultiLike,
  ScriptOptions,
  ScriptPipeline,
} from './redis/script.js'
export { Script } from './redis/script.js'
