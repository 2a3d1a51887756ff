/**
 * Every error kunci throws is a `KunciError` with a stable `code`. Codes are never reused or
 * renamed; `docs/errors.md` has an anchor per code and a test keeps the two in step.
 *
 * Contention and outage are kept apart on purpose: `E_LOCK_NOT_ACQUIRED` means other holders
 * won the vote (retrying later makes sense), `E_LOCK_UNAVAILABLE` means a quorum of nodes could
 * not be reached (page somebody).
 */

export type ErrorCode =
  | 'E_INVALID_OPTION'
  | 'E_LOCK_NOT_ACQUIRED'
  | 'E_LOCK_UNAVAILABLE'
  | 'E_LOCK_LOST'
  | 'E_LOCK_ABORTED'
  | 'E_LOCK_MAX_HOLD'
  | 'E_CLOSED'
  | 'E_UNEXPECTED_REPLY'
  // cache (packages/kunci/src/cache)
  | 'E_CACHE_LOADER_FAILED'
  | 'E_CACHE_LOADER_TIMEOUT'
  | 'E_CACHE_SERIALIZE'
  | 'E_CACHE_UNAVAILABLE'

export const ERROR_CODES: readonly ErrorCode[] = Object.freeze([
  'E_INVALID_OPTION',
  'E_LOCK_NOT_ACQUIRED',
  'E_LOCK_UNAVAILABLE',
  'E_LOCK_LOST',
  'E_LOCK_ABORTED',
  'E_LOCK_MAX_HOLD',
  'E_CLOSED',
  'E_UNEXPECTED_REPLY',
  'E_CACHE_LOADER_FAILED',
  'E_CACHE_LOADER_TIMEOUT',
  'E_CACHE_SERIALIZE',
  'E_CACHE_UNAVAILABLE',
] satisfies ErrorCode[])

export abstract class KunciError extends Error {
  abstract readonly code: ErrorCode
  constructor(message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
  }
}

/** An option or argument is out of range or of the wrong type. Thrown at once, never retried. */
export class InvalidOptionError extends KunciError {
  readonly code = 'E_INVALID_OPTION'
  constructor(
    /** Name of the offending option, e.g. `ttlMs`. */
    readonly option: string,
    message: string,
  ) {
    super(`Invalid option "${option}": ${message}`)
  }
}

/** What one Redis node answered during an acquire, extend or release. */
export type NodeVoteStatus =
  | 'granted' // the node holds the lock for us
  | 'held' // another holder has it on this node
  | 'fenced' // the node has seen a higher fencing token: our proposal was too low
  | 'quarantined' // the node restarted recently and may not vote yet
  | 'timeout' // no answer within nodeTimeoutMs
  | 'pending' // no answer yet when the other nodes had already decided the outcome
  | 'error' // the node answered with an error or the connection failed
  | 'released' // release: our key was deleted
  | 'not-owner' // release/extend: the key was gone or belonged to another holder

export interface NodeVote {
  /** Index of the node in the `clients` array. */
  readonly node: number
  readonly status: NodeVoteStatus
  /** The error, for `error` and `timeout`. */
  readonly error?: Error
}

/** Other holders won: fewer than a quorum of nodes granted the lock, and enough nodes answered. */
export class LockNotAcquiredError extends KunciError {
  readonly code = 'E_LOCK_NOT_ACQUIRED'
  constructor(
    readonly resources: readonly string[],
    readonly attempts: number,
    /** Votes of the last attempt. */
    readonly votes: readonly NodeVote[],
    message?: string,
  ) {
    super(
      message ??
        `Lock on ${fmt(resources)} is held by another client (${attempts} attempt${attempts === 1 ? '' : 's'}). ` +
          'Retry later, or raise retryCount / acquireTimeoutMs to wait longer.',
    )
  }
}

/** A quorum of nodes could not be reached (down, paused, partitioned or quarantined after a restart). */
export class LockUnavailableError extends KunciError {
  readonly code = 'E_LOCK_UNAVAILABLE'
  constructor(
    readonly resources: readonly string[],
    readonly votes: readonly NodeVote[],
    options?: ErrorOptions,
  ) {
    const bad = votes.filter(
      (v) => v.status === 'timeout' || v.status === 'error' || v.status === 'quarantined',
    )
    super(
      `Cannot lock ${fmt(resources)}: ${bad.length} of ${votes.length} Redis nodes are unreachable or quarantined ` +
        `(${bad.map((v) => `node ${v.node}: ${v.status}${v.error ? ` (${v.error.message})` : ''}`).join('; ')}). ` +
        'A majority must be up; check the nodes and the network.',
      options,
    )
  }
}

/** The lock is no longer ours: it expired, was taken over, or was already released. */
export class LockLostError extends KunciError {
  readonly code = 'E_LOCK_LOST'
  constructor(
    readonly resources: readonly string[],
    reason: string,
    readonly votes: readonly NodeVote[] = [],
  ) {
    super(
      `Lock on ${fmt(resources)} is lost: ${reason}. Work done under it may have overlapped another holder; ` +
        'check the fencing token at the resource and use a longer ttlMs or auto-extension.',
    )
  }
}

/** The caller's AbortSignal fired while waiting for the lock. No keys are left behind. */
export class AcquireAbortedError extends KunciError {
  readonly code = 'E_LOCK_ABORTED'
  constructor(
    readonly resources: readonly string[],
    options?: ErrorOptions,
  ) {
    super(`Acquiring the lock on ${fmt(resources)} was aborted by the caller's signal.`, options)
  }
}

/** `using()` held the lock for `maxHoldMs` and stopped extending it. */
export class MaxHoldExceededError extends KunciError {
  readonly code = 'E_LOCK_MAX_HOLD'
  constructor(
    readonly resources: readonly string[],
    readonly maxHoldMs: number,
  ) {
    super(
      `Lock on ${fmt(resources)} reached maxHoldMs (${maxHoldMs} ms) and is no longer extended. ` +
        'Finish the work sooner or raise maxHoldMs.',
    )
  }
}

/** The lock manager or cache was closed. */
export class ClosedError extends KunciError {
  readonly code = 'E_CLOSED'
  constructor(what: string) {
    super(`${what} is closed; create a new one.`)
  }
}

/** Redis answered something a script never returns: a version mismatch or a foreign key of the same name. */
export class UnexpectedReplyError extends KunciError {
  readonly code = 'E_UNEXPECTED_REPLY'
  constructor(
    readonly script: string,
    readonly reply: unknown,
  ) {
    super(
      `Unexpected reply from script ${script}: ${safeJson(reply)}. Is another tool using the same key prefix?`,
    )
  }
}

function fmt(resources: readonly string[]): string {
  return resources.length === 1 ? `"${resources[0]}"` : `[${resources.map((r) => `"${r}"`).join(', ')}]`
}
function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v)?.slice(0, 200) ?? String(v)
  } catch {
    return String(v)
  }
}

// cache (packages/kunci/src/cache)

/** The loader threw (or rejected) and there was no stale value within the grace period to serve. */
export class CacheLoaderError extends KunciError {
  readonly code = 'E_CACHE_LOADER_FAILED'
  constructor(
    readonly key: string,
    options: ErrorOptions,
  ) {
    super(
      `Loader for cache key "${key}" failed and no stale value was available. ` +
        'See `cause`; raise graceMs to serve the last value while the source is failing.',
      options,
    )
  }
}

/**
 * The value was not ready within `hardTimeoutMs`: our own loader was too slow (`phase: 'load'`),
 * or we waited that long for another process's loader (`phase: 'wait'`).
 */
export class CacheLoaderTimeoutError extends KunciError {
  readonly code = 'E_CACHE_LOADER_TIMEOUT'
  constructor(
    readonly key: string,
    readonly timeoutMs: number,
    readonly phase: 'load' | 'wait',
  ) {
    super(
      `Cache key "${key}" was not loaded within hardTimeoutMs (${timeoutMs} ms) while ` +
        `${phase === 'load' ? 'running the loader' : 'waiting for another process to load it'}. ` +
        'Raise hardTimeoutMs, make the loader faster, or set graceMs/softTimeoutMs to serve stale values.',
    )
  }
}

/** A value could not be turned into text (BigInt, a cycle, a function…) or cached text could not be read back. */
export class CacheSerializeError extends KunciError {
  readonly code = 'E_CACHE_SERIALIZE'
  constructor(
    readonly key: string,
    readonly direction: 'serialize' | 'deserialize',
    options?: ErrorOptions,
  ) {
    super(
      direction === 'serialize'
        ? `Value for cache key "${key}" cannot be serialised (BigInt, a circular reference, a function?). ` +
            'Convert it to plain JSON data or pass a serializer that handles it.'
        : `Cached text for key "${key}" cannot be deserialised: written by another serializer or another tool?`,
      options,
    )
  }
}

/** Redis could not be reached (or refused the command) and the operation needs it. */
export class CacheUnavailableError extends KunciError {
  readonly code = 'E_CACHE_UNAVAILABLE'
  constructor(
    readonly key: string | undefined,
    readonly operation: string,
    options: ErrorOptions,
  ) {
    super(
      `Cache ${operation}${key === undefined ? '' : ` of "${key}"`} failed: Redis is unavailable or refused the ` +
        'command. See `cause`; check the Redis nodes.',
      options,
    )
  }
}
