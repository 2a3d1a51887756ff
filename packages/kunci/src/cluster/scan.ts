/**
 * Walking the keyspace with SCAN, on one Redis or on every master of a Cluster. Never KEYS:
 * KEYS is O(N) in one call and blocks the single-threaded server for all clients while it runs;
 * SCAN does a bounded amount of work (about `count` slots of the hash table) per call.
 *
 * Guarantees (docs/cluster.md): a key that matches and exists for the whole scan is returned at
 * least once; it may be returned more than once (SCAN itself repeats keys when the table is
 * resized, and a master that fails over mid-scan is scanned again from its new master). Keys
 * created or deleted during the scan may or may not be returned. During resharding, a key moved
 * from a master not yet scanned to one already scanned can be missed: run the scan again after
 * the migration if that matters.
 */
import { InvalidOptionError } from '../errors.js'
import { boolean, integer, number, signal, string } from '../options.js'
import { type KunciClient, toRedisPort } from '../redis/client.js'
import type { ClusterView, NodeConn, RedisPort } from '../redis/port.js'
import { groupBySlot } from './hash-tag.js'
import { SLOT_COUNT } from './slot.js'

export interface ScanOptions {
  /**
   * Redis glob pattern (SCAN MATCH). Build literal parts with `escapeGlob`, e.g.
   * `escapeGlob(prefix) + '*'`.
   * @defaultValue '*'
   */
  match?: string
  /**
   * COUNT hint for each SCAN call: roughly how many hash-table buckets the server walks per call.
   * Larger is fewer round trips but longer single commands.
   * @defaultValue 500
   */
  count?: number
  /**
   * Stops the scan, also while a SCAN call is waiting on a stuck node; the iteration then throws
   * `signal.reason`. Without it, a paused node holds the scan until the client's `commandTimeout`.
   */
  signal?: AbortSignal
  /**
   * Cluster only: how long to keep re-reading the slot table and retrying after a master fails
   * mid-scan (a failover) before the error is thrown. The clock restarts whenever a master is
   * scanned completely.
   * @defaultValue 15000
   */
  failoverTimeoutMs?: number
}

export interface DeleteByPatternOptions extends ScanOptions {
  /** Required, so that a forgotten pattern never means "delete everything"; pass '*' for that. */
  match: string
  /**
   * Delete with UNLINK (memory reclaimed in a background thread) rather than DEL.
   * @defaultValue true
   */
  unlink?: boolean
}

export const DEFAULT_SCAN_OPTIONS = Object.freeze({
  match: '*',
  count: 500,
  failoverTimeoutMs: 15_000,
} satisfies Required<Omit<ScanOptions, 'signal'>>)

export const DEFAULT_DELETE_BY_PATTERN_OPTIONS = Object.freeze({ ...DEFAULT_SCAN_OPTIONS, unlink: true })

/** Upper bound for `count`: beyond it a single SCAN call could block the server noticeably. */
export const MAX_SCAN_COUNT = 100_000

interface ResolvedScanOptions {
  readonly match: string
  readonly count: number
  readonly failoverTimeoutMs: number
  readonly signal: AbortSignal | undefined
}

interface ResolvedDeleteOptions extends ResolvedScanOptions {
  readonly unlink: boolean
}

/** Merges `input` over the defaults and range-checks it; throws `InvalidOptionError` at once. */
export function resolveScanOptions(input: ScanOptions = {}): ResolvedScanOptions {
  const d = DEFAULT_SCAN_OPTIONS
  return {
    match: string('match', input.match ?? d.match, {
      nonEmpty: true,
      hint: 'a glob pattern; use "*" to match every key',
    }),
    count: integer('count', input.count ?? d.count, { min: 1, max: MAX_SCAN_COUNT }),
    failoverTimeoutMs: number('failoverTimeoutMs', input.failoverTimeoutMs ?? d.failoverTimeoutMs, {
      min: 0,
      infinity: true,
    }),
    signal: signal('signal', input.signal),
  }
}

/** The same resolver for `deleteByPattern`, which also requires `match` and reads `unlink`. */
export function resolveDeleteByPatternOptions(input: DeleteByPatternOptions): ResolvedDeleteOptions {
  if (input === undefined || input === null || input.match === undefined) {
    throw new InvalidOptionError(
      'match',
      'deleteByPattern needs an explicit pattern, e.g. escapeGlob(prefix) + "*" (or "*" to delete every key).',
    )
  }
  const unlink = boolean('unlink', input.unlink ?? DEFAULT_DELETE_BY_PATTERN_OPTIONS.unlink)
  return { ...resolveScanOptions(input), unlink }
}

/**
 * Escapes the glob metacharacters `\ * ? [ ]` so that `text` matches only itself in a SCAN
 * MATCH pattern. Redis treats `\x` as a literal `x` for any `x`, so escaping `]` is harmless.
 *
 * @example escapeGlob('user[1]*') + '*' === 'user\\[1\\]\\**'
 */
export function escapeGlob(text: string): string {
  return text.replace(/[\\*?[\]]/g, '\\$&')
}

/**
 * Yields batches of key names matching `options.match`, from a standalone Redis or from every
 * master of a Cluster (replicas are skipped: they hold the same keys). Batches are never empty.
 * At-least-once: see the module comment.
 *
 * Keys are decoded as UTF-8; `deleteByPattern` works on raw bytes so binary keys are deleted too.
 */
export async function* scanKeys(given: KunciClient, options: ScanOptions = {}): AsyncGenerator<string[]> {
  const opts = resolveScanOptions(options)
  const port = toRedisPort(given, 'client')
  for await (const batch of scanBatches<string>(port, opts, false)) yield batch
}

/**
 * Deletes every key matching `options.match` on a standalone Redis or on every master of a
 * Cluster, batch by batch as SCAN finds them, and returns how many keys were deleted (a key
 * found twice is counted once, since the second UNLINK deletes nothing).
 *
 * On a Cluster each batch is split by slot and sent as one UNLINK per slot, because a multi-key
 * command across slots fails with CROSSSLOT; the client routes each to its master and follows
 * MOVED/ASK. Keys created during the call may survive it: it is not a snapshot.
 *
 * @throws InvalidOptionError when `match` is missing or the client has a `keyPrefix` (SCAN
 * returns prefixed names, which ioredis would prefix a second time on UNLINK).
 */
export async function deleteByPattern(given: KunciClient, options: DeleteByPatternOptions): Promise<number> {
  const opts = resolveDeleteByPatternOptions(options)
  return deleteMatching(toRedisPort(given, 'client'), opts)
}

/** deleteByPattern on a port, for the cache's invalidatePrefix. */
export async function deleteMatching(port: RedisPort, options: DeleteByPatternOptions): Promise<number> {
  const opts = resolveDeleteByPatternOptions(options)
  if (port.keyPrefix) {
    throw new InvalidOptionError(
      'client',
      `deleteByPattern cannot use a client with keyPrefix "${port.keyPrefix}": SCAN returns prefixed names ` +
        'that ioredis would prefix again. Pass a client without keyPrefix and put the prefix in match.',
    )
  }
  let deleted = 0
  for await (const keys of scanBatches<Buffer>(port, opts, true)) {
    if (port.cluster === undefined) {
      deleted += await removeKeys(port, keys, opts.unlink)
      continue
    }
    const replies = await Promise.all(
      Array.from(groupBySlot(keys).values(), (group) => removeKeys(port, group, opts.unlink)),
    )
    for (const n of replies) deleted += n
  }
  return deleted
}

async function removeKeys(port: RedisPort, keys: Buffer[], unlink: boolean): Promise<number> {
  return Number(await port.send(unlink ? 'unlink' : 'del', keys, { key: keys[0] }))
}

/** What scanning needs of a node: its commands. */
type Scannable = Pick<NodeConn, 'send'>

async function* scanBatches<K>(
  port: RedisPort,
  opts: ResolvedScanOptions,
  binary: boolean,
): AsyncGenerator<K[]> {
  opts.signal?.throwIfAborted()
  if (port.cluster) yield* scanCluster<K>(port.cluster, opts, binary)
  else yield* scanNode<K>(port, opts, binary)
}

async function* scanNode<K>(
  node: Scannable,
  opts: ResolvedScanOptions,
  binary: boolean,
): AsyncGenerator<K[]> {
  let cursor = '0'
  do {
    opts.signal?.throwIfAborted()
    const reply = await abortable(
      node.send('scan', [cursor, 'MATCH', opts.match, 'COUNT', opts.count], { binary }),
      opts.signal,
    )
    const [next, keys] = reply as [string | Buffer, K[]]
    cursor = next.toString()
    if (keys.length > 0) yield keys
  } while (cursor !== '0')
}

/**
 * Scans masters until every slot that has an owner has been covered by a complete scan of the
 * master that owned it when that scan began. If a master fails mid-scan, the slot table is
 * re-read and whichever master now owns its slots (the promoted replica) is scanned from the
 * start; a master whose slots are all covered already is skipped, so a failover after a master
 * finished does not repeat its keys.
 */
async function* scanCluster<K>(
  cluster: ClusterView,
  opts: ResolvedScanOptions,
  binary: boolean,
): AsyncGenerator<K[]> {
  await cluster.whenReady()
  const covered = new Uint8Array(SLOT_COUNT)
  let failingSince: number | undefined
  let attempt = 0
  for (;;) {
    opts.signal?.throwIfAborted()
    const pending = [...slotsByMaster(cluster)].filter(([, slots]) => slots.some((s) => covered[s] === 0))
    if (pending.length === 0) return
    let failure: unknown
    for (const [address, slots] of pending) {
      const node = cluster.masters().find((n) => n.address === address)
      try {
        if (!node) throw new Error(`master ${address} is in the slot table but has no connection yet`)
        yield* scanNode<K>(node, opts, binary)
      } catch (err) {
        if (opts.signal?.aborted) throw err
        failure = err
        break
      }
      for (const s of slots) covered[s] = 1
      failingSince = undefined
      attempt = 0
    }
    if (failure === undefined) continue
    failingSince ??= Date.now()
    if (Date.now() - failingSince >= opts.failoverTimeoutMs) throw failure
    await sleep(Math.min(50 * 2 ** attempt++, 1000), opts.signal)
    await cluster.refresh()
  }
}

/** Master address (`host:port`, as the slot table names it) → the slots it serves. */
function slotsByMaster(cluster: ClusterView): Map<string, number[]> {
  const owners = new Map<string, number[]>()
  for (let slot = 0; slot < SLOT_COUNT; slot++) {
    const master = cluster.ownerOf(slot)
    if (master === undefined) continue
    const slots = owners.get(master)
    if (slots) slots.push(slot)
    else owners.set(master, [slot])
  }
  return owners
}

/**
 * Rejects with the signal's reason as soon as it fires, so that a SCAN stuck on a paused or
 * partitioned node does not hold the caller (the command itself is left to the client's own
 * timeout; its late reply is ignored).
 */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(err)
      },
    )
  })
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal!.reason)
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
