import { InvalidOptionError } from '../errors.js'
import { func, integer, milliseconds, number, oneOf, signal, string } from '../options.js'

/**
 * How a manager dates a node it has never seen (no `run_id` known): `'uptime'` from INFO's
 * uptime when the node's clock agrees with ours within clockToleranceMs, `'full'` a quarantine
 * of maxTtlMs whatever INFO says.
 */
export type FirstContact = 'uptime' | 'full'

/** The durability a deployment promises for lock and fence keys; nodes weaker than this are warned about. */
export type PersistenceProfile = 'always' | 'everysec' | 'none'

export type WarningCode =
  | 'KUNCI_W_PERSISTENCE'
  | 'KUNCI_W_EVICTION'
  | 'KUNCI_W_CONFIG_UNREADABLE'
  | 'KUNCI_W_AOF_ACL'

/** Every warning code, each with a section in docs/errors.md (never reused). */
export const WARNING_CODES: readonly WarningCode[] = Object.freeze([
  'KUNCI_W_PERSISTENCE',
  'KUNCI_W_EVICTION',
  'KUNCI_W_CONFIG_UNREADABLE',
  'KUNCI_W_AOF_ACL',
])

/**
 * Something a lock manager wants operators to know, at the first sight of each node (`run_id`):
 * `KUNCI_W_PERSISTENCE` a node less durable than the `persistence` profile;
 * `KUNCI_W_EVICTION` a node whose `maxmemory-policy` may evict lock keys (they have a TTL);
 * `KUNCI_W_CONFIG_UNREADABLE` a setting could not be read;
 * `KUNCI_W_AOF_ACL` a node with AOF whose default user may not run what the lock scripts write:
 * restarted from its AOF, it drops every lock and fencing token (aof-acl.ts).
 */
export interface KunciWarning {
  readonly code: WarningCode
  readonly node: number
  readonly message: string
}

/** Per-acquisition settings. Each can be set on the manager (default for all calls) or per call. */
export interface AcquireOptions {
  /** Lock time-to-live on every node, in ms. Must exceed the drift allowance. @defaultValue 10000, or maxTtlMs if smaller */
  ttlMs?: number
  /** Attempts after the first one that lost to another holder or an outage. 0 = a single attempt. @defaultValue 10 */
  retryCount?: number
  /** Base wait between attempts, in ms; a release notification ends the wait early. @defaultValue 200 */
  retryDelayMs?: number
  /** Uniform random extra wait added to each retry delay, in ms, so competing clients spread out. @defaultValue 100 */
  retryJitterMs?: number
  /**
   * Upper bound on the whole acquire, queueing behind holders in this process included, in ms.
   * @defaultValue (retryCount + 1) × (retryDelayMs + retryJitterMs) + nodeTimeoutMs
   */
  acquireTimeoutMs?: number
  /** Cancels a waiting acquire at once; keys granted by an attempt in flight are released. */
  signal?: AbortSignal | undefined
}

/** Options of `using()`: acquisition plus automatic extension. */
export interface UsingOptions extends AcquireOptions {
  /** Extend when the remaining validity drops below this, in ms. @defaultValue ttlMs / 2 */
  extendBeforeMs?: number
  /** Stop extending after holding this long, in ms; the signal then aborts with E_LOCK_MAX_HOLD. Infinity = no bound. @defaultValue 60000 */
  maxHoldMs?: number
}

export interface LockManagerOptions extends Omit<AcquireOptions, 'signal' | 'acquireTimeoutMs'> {
  /** Per-node time-out for one command, in ms; a slow, paused or cut-off node cannot stall an attempt longer. @defaultValue 200 */
  nodeTimeoutMs?: number
  /** Clock drift allowance = ttl × driftFactor + driftConstantMs. @defaultValue 0.01 */
  driftFactor?: number
  /** @defaultValue 2 */
  driftConstantMs?: number
  /**
   * Largest ttlMs any client uses with these nodes. A node that restarted does not vote until this
   * long after its restart, so every lock granted before the restart has expired.
   * @defaultValue 60000
   */
  maxTtlMs?: number
  /** Keep restarted nodes out of the quorum for maxTtlMs (the "delayed restart" of the Redlock spec). @defaultValue true */
  quarantine?: boolean
  /**
   * A node this manager has never seen: `'uptime'` trusts INFO's uptime (Redis computes it from
   * its wall clock) when the node's clock agrees with ours within clockToleranceMs, else sits it
   * out for maxTtlMs; `'full'` always sits it out for maxTtlMs (a new process then waits that
   * long before its first lock). A restart seen by a manager that knew the node is always
   * maxTtlMs from when it is seen. @defaultValue 'uptime'
   */
  firstContact?: FirstContact
  /**
   * How far a node's wall clock may differ from ours, in ms, for its uptime to be trusted on
   * first contact; also added to such a quarantine. @defaultValue 1000
   */
  clockToleranceMs?: number
  /** The durability you expect of the nodes; weaker nodes trigger a warning at start-up. @defaultValue 'always' */
  persistence?: PersistenceProfile
  /** Prefix of every key and channel. @defaultValue 'kunci:' */
  prefix?: string
  /** Consecutive in-process hand-overs before a waiting client in another process gets its turn. @defaultValue 8 */
  maxLocalHandoffs?: number
  /** Receives warnings. @defaultValue process.emitWarning */
  onWarning?: (warning: KunciWarning) => void
}

/** Every default in one place. Keep the `@defaultValue` tags above in step with this table. */
export const DEFAULT_LOCK_OPTIONS = Object.freeze({
  ttlMs: 10_000,
  retryCount: 10,
  retryDelayMs: 200,
  retryJitterMs: 100,
  nodeTimeoutMs: 200,
  driftFactor: 0.01,
  driftConstantMs: 2,
  maxTtlMs: 60_000,
  quarantine: true,
  firstContact: 'uptime' as FirstContact,
  clockToleranceMs: 1000,
  persistence: 'always' as PersistenceProfile,
  prefix: 'kunci:',
  maxLocalHandoffs: 8,
  maxHoldMs: 60_000,
})

export interface ResolvedManagerOptions {
  readonly nodeTimeoutMs: number
  readonly driftFactor: number
  readonly driftConstantMs: number
  readonly maxTtlMs: number
  readonly quarantine: boolean
  readonly firstContact: FirstContact
  readonly clockToleranceMs: number
  readonly persistence: PersistenceProfile
  readonly prefix: string
  readonly maxLocalHandoffs: number
  readonly onWarning: (warning: KunciWarning) => void
  readonly acquire: ResolvedAcquireOptions
}

export interface ResolvedAcquireOptions {
  readonly ttlMs: number
  readonly retryCount: number
  readonly retryDelayMs: number
  readonly retryJitterMs: number
  readonly acquireTimeoutMs: number
  /** ttlMs × driftFactor + driftConstantMs, precomputed. */
  readonly driftMs: number
}

export function resolveManagerOptions(input: LockManagerOptions): ResolvedManagerOptions {
  const d = DEFAULT_LOCK_OPTIONS
  const nodeTimeoutMs = integer('nodeTimeoutMs', input.nodeTimeoutMs ?? d.nodeTimeoutMs, { min: 1 })
  const driftFactor = number('driftFactor', input.driftFactor ?? d.driftFactor, { min: 0, below: 1 })
  const driftConstantMs = number('driftConstantMs', input.driftConstantMs ?? d.driftConstantMs, { min: 0 })
  const maxTtlMs = integer('maxTtlMs', input.maxTtlMs ?? d.maxTtlMs, { min: 1 })
  const persistence = oneOf<PersistenceProfile>('persistence', input.persistence ?? d.persistence, [
    'always',
    'everysec',
    'none',
  ])
  const prefix = string('prefix', input.prefix ?? d.prefix, {
    forbidden: /[{}]/,
    hint: 'without "{" or "}" (the resource is the hash tag)',
  })
  const onWarning = func<(w: KunciWarning) => void>('onWarning', input.onWarning ?? defaultWarning)
  const base = {
    nodeTimeoutMs,
    driftFactor,
    driftConstantMs,
    maxTtlMs,
    quarantine: input.quarantine ?? d.quarantine,
    firstContact: oneOf<FirstContact>('firstContact', input.firstContact ?? d.firstContact, [
      'uptime',
      'full',
    ]),
    clockToleranceMs: milliseconds('clockToleranceMs', input.clockToleranceMs ?? d.clockToleranceMs),
    persistence,
    prefix,
    maxLocalHandoffs: integer('maxLocalHandoffs', input.maxLocalHandoffs ?? d.maxLocalHandoffs, { min: 0 }),
    onWarning,
  }
  // Without an explicit ttlMs, a small maxTtlMs caps the default instead of rejecting it.
  const ttlMs = input.ttlMs ?? Math.min(d.ttlMs, maxTtlMs)
  const acquire = resolveAcquireOptions({ ...input, ttlMs }, { ...base, acquire: undefined as never })
  return Object.freeze({ ...base, acquire })
}

/**
 * Merges per-call options over the manager's (or the defaults) and range-checks the result.
 * The manager resolves its own defaults once; calls without options reuse that object.
 */
export function resolveAcquireOptions(
  input: AcquireOptions,
  manager: Omit<ResolvedManagerOptions, 'acquire'> & { acquire?: ResolvedAcquireOptions },
): ResolvedAcquireOptions {
  const base = manager.acquire ?? DEFAULT_LOCK_OPTIONS
  const ttlMs = integer('ttlMs', input.ttlMs ?? base.ttlMs, { min: 1 })
  if (ttlMs > manager.maxTtlMs) {
    throw new InvalidOptionError(
      'ttlMs',
      `${ttlMs} exceeds maxTtlMs (${manager.maxTtlMs}); raise maxTtlMs on the manager (restarted nodes then sit out longer)`,
    )
  }
  const driftMs = ttlMs * manager.driftFactor + manager.driftConstantMs
  if (ttlMs <= driftMs) {
    // Even an instant grant would already be invalid: fail now instead of on every attempt.
    throw new InvalidOptionError(
      'ttlMs',
      `${ttlMs} ms leaves no validity after the clock-drift allowance of ${driftMs} ms ` +
        `(ttl × driftFactor + driftConstantMs); use a ttlMs well above it, e.g. ${Math.max(100, Math.ceil(10 * driftMs))}`,
    )
  }
  const retryCount = integer('retryCount', input.retryCount ?? base.retryCount, { min: 0 })
  const retryDelayMs = integer('retryDelayMs', input.retryDelayMs ?? base.retryDelayMs, { min: 0 })
  const retryJitterMs = integer('retryJitterMs', input.retryJitterMs ?? base.retryJitterMs, { min: 0 })
  const acquireTimeoutMs = number(
    'acquireTimeoutMs',
    input.acquireTimeoutMs ?? (retryCount + 1) * (retryDelayMs + retryJitterMs) + manager.nodeTimeoutMs,
    { min: 0, infinity: true },
  )
  signal('signal', input.signal)
  return { ttlMs, retryCount, retryDelayMs, retryJitterMs, acquireTimeoutMs, driftMs }
}

export function resolveUsingLimits(
  input: UsingOptions,
  ttlMs: number,
): { extendBeforeMs: number; maxHoldMs: number } {
  const extendBeforeMs = integer('extendBeforeMs', input.extendBeforeMs ?? Math.ceil(ttlMs / 2), { min: 1 })
  if (extendBeforeMs >= ttlMs) {
    throw new InvalidOptionError('extendBeforeMs', `must be below ttlMs (${ttlMs}), got ${extendBeforeMs}`)
  }
  const maxHoldMs = number('maxHoldMs', input.maxHoldMs ?? DEFAULT_LOCK_OPTIONS.maxHoldMs, {
    min: 1,
    infinity: true,
  })
  return { extendBeforeMs, maxHoldMs }
}

function defaultWarning(w: KunciWarning): void {
  process.emitWarning(w.message, { code: w.code })
}
