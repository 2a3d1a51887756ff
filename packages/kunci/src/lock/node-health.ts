import type { RedisPort } from '../redis/port.js'
import { checkAofReplay, replaysAofWithAclCheck } from './aof-acl.js'
import { publishEvent, QUARANTINE_CHANNEL, WARNING_CHANNEL } from './events.js'
import type { FirstContact, KunciWarning, PersistenceProfile } from './lock-options.js'

export interface NodeHealthOptions {
  readonly quarantine: boolean
  readonly maxTtlMs: number
  readonly firstContact: FirstContact
  readonly clockToleranceMs: number
  readonly persistence: PersistenceProfile
  readonly nodeTimeoutMs: number
  /** The manager's key prefix: the AOF check asks about a key under it. */
  readonly prefix: string
  readonly onWarning: (warning: KunciWarning) => void
}

/** Why a node sits out (published on kunci:lock:quarantined). */
export type QuarantineReason = 'restarted' | 'young' | 'clock-disagrees' | 'first-contact'

/**
 * Whether one lock node may vote: its restart check, its quarantine, and the warnings about its
 * eviction policy and persistence (the node link, node-link.ts, does the batching).
 *
 * Restarts are caught from the connection: the port reports `close` when the socket drops,
 * which bumps `incarnation` and stops the node voting until `INFO` on the new connection has
 * been read. A node that restarted may have lost locks it granted, so it sits out (quarantine)
 * until every lock granted before its restart has expired. A reply that arrives for an older
 * incarnation is not counted: a client may resend a command to the restarted server.
 * A cluster fails over to replicas instead of restarting empty and its client follows it: a
 * cluster node is verified from the start.
 *
 * How long, never from the node's wall clock alone (issue 21): Redis 7.0 computes
 * `uptime_in_seconds` from its wall clock, so a node restarted empty whose clock then steps
 * forward looks old enough to vote at once.
 * - A `run_id` other than the one we saw: the restart happened before we read the new one, so
 *   `maxTtlMs` from now, on our monotonic clock, outlasts every lock the old process granted.
 * - First contact (we never saw this node): INFO is all there is. Its uptime is trusted only if
 *   the node's clock (`server_time_usec`) agrees with ours within `clockToleranceMs`, and the
 *   quarantine gets that tolerance on top (a step smaller than it is not seen); otherwise, or
 *   with `firstContact: 'full'`, `maxTtlMs` from now. What remains (docs/locks.md): a node that
 *   started with a clock behind and was then stepped to the right time agrees with us and
 *   reports an uptime too long by the step.
 */
export class NodeHealth {
  readonly index: number
  readonly #port: RedisPort
  readonly #opts: NodeHealthOptions
  readonly #unwatch: () => void
  #incarnation = 0
  #verified: boolean
  #verifying: Promise<void> | undefined
  #quarantinedUntil = 0
  #runId: string | undefined
  #warnedRunId: string | undefined
  #closed = false

  constructor(index: number, port: RedisPort, opts: NodeHealthOptions) {
    this.index = index
    this.#port = port
    this.#opts = opts
    this.#verified = port.cluster !== undefined
    this.#unwatch = port.watch({
      close: () => {
        this.#incarnation++
        if (port.cluster === undefined) this.#verified = false
      },
      ready: () => {
        if (port.cluster === undefined) void this.#startVerify()
      },
    })
    if (!this.#verified && port.ready) void this.#startVerify()
  }

  /** The connection the node is on; a vote asked for on an older one is not counted. */
  get incarnation(): number {
    return this.#incarnation
  }

  /** Has INFO been read on the current connection? Until then requests wait in the link. */
  get verified(): boolean {
    return this.#verified
  }

  get closed(): boolean {
    return this.#closed
  }

  /** May this node's answer count toward a quorum right now? */
  canVote(now = performance.now()): boolean {
    return this.#verified && now >= this.#quarantinedUntil
  }

  /** Why the node cannot vote, for the per-node outcome. */
  get quarantined(): boolean {
    return this.#verified && performance.now() < this.#quarantinedUntil
  }

  /** Resolves once the node has been checked (or the check failed); `undefined` if it was. */
  whenVerified(): Promise<void> | undefined {
    if (this.#verified || this.#closed) return undefined
    return this.#verifying ?? this.#startVerify()
  }

  detach(): void {
    this.#closed = true
    this.#unwatch()
  }

  #startVerify(): Promise<void> {
    const incarnation = this.#incarnation
    const p = this.#verify(incarnation).finally(() => {
      if (this.#verifying === p) this.#verifying = undefined
    })
    this.#verifying = p
    return p
  }

  async #verify(incarnation: number): Promise<void> {
    let info: string
    const sentWallMs = Date.now()
    try {
      info = String(await withTimeout(this.#port.send('info', []), this.#opts.nodeTimeoutMs * 5))
    } catch {
      return // stays unverified; the next `ready` or vote tries again
    }
    const seenAt = performance.now()
    const seenWallMs = Date.now()
    if (incarnation !== this.#incarnation || this.#closed) return
    const fields = parseInfo(info)
    const runId = fields.get('run_id')
    if (this.#opts.quarantine) {
      const q = this.#quarantineFor(fields, runId, sentWallMs, seenWallMs)
      if (q !== undefined) {
        this.#quarantinedUntil = Math.max(this.#quarantinedUntil, seenAt + q.ms)
        publishEvent(QUARANTINE_CHANNEL, {
          node: this.index,
          runId,
          restarted: q.reason === 'restarted',
          reason: q.reason,
          quarantineMs: q.ms,
        })
      }
    }
    this.#runId = runId
    this.#verified = true
    if (runId !== this.#warnedRunId) {
      this.#warnedRunId = runId
      this.#checkEviction(fields)
      void this.#checkPersistence(fields)
    }
  }

  /**
   * How long the node must sit out from now (see the class comment), or undefined. `sentWallMs`
   * and `seenWallMs`: our wall clock when INFO was sent and when its reply came.
   */
  #quarantineFor(
    fields: Map<string, string>,
    runId: string | undefined,
    sentWallMs: number,
    seenWallMs: number,
  ): { ms: number; reason: QuarantineReason } | undefined {
    const { maxTtlMs, clockToleranceMs, firstContact } = this.#opts
    if (this.#runId !== undefined) {
      return runId === this.#runId ? undefined : { ms: maxTtlMs, reason: 'restarted' }
    }
    if (firstContact === 'full') return { ms: maxTtlMs, reason: 'first-contact' }
    // The node's clock when it answered lies between our send and our receipt, give or take the
    // tolerance; outside that, its uptime cannot be trusted.
    const nodeWallMs = Number(fields.get('server_time_usec')) / 1000
    if (!(nodeWallMs >= sentWallMs - clockToleranceMs && nodeWallMs <= seenWallMs + clockToleranceMs)) {
      return { ms: maxTtlMs, reason: 'clock-disagrees' }
    }
    // Whole seconds, rounded down: never longer than the truth. A step forward smaller than the
    // tolerance is not seen above, so the tolerance is added; never more than maxTtlMs, since
    // the node started before now.
    const uptimeMs = Number(fields.get('uptime_in_seconds') ?? '0') * 1000
    const ms = Math.min(maxTtlMs, maxTtlMs - uptimeMs + clockToleranceMs)
    return ms > 0 ? { ms, reason: 'young' } : undefined
  }

  /**
   * Lock keys have a TTL, so every policy but `noeviction` may evict them when the node is full
   * (`volatile-*` picks among keys with a TTL, `allkeys-*` among all): an evicted lock is a lock
   * the node forgets while its holder works. With `noeviction` a full node answers OOM, a failed
   * vote. Read from INFO (memory section), which the restart check reads anyway: no round trip.
   */
  #checkEviction(fields: Map<string, string>): void {
    const policy = fields.get('maxmemory_policy')
    const maxmemory = Number(fields.get('maxmemory') ?? '0')
    // maxmemory 0: no limit, nothing is ever evicted whatever the policy says.
    if (policy === undefined || policy === 'noeviction' || !(maxmemory > 0)) return
    this.#warn({
      code: 'KUNCI_W_EVICTION',
      node: this.index,
      message:
        `kunci: node ${this.index} runs with maxmemory ${maxmemory} and maxmemory-policy ${policy}: ` +
        'when it is full it can evict lock keys (they have a TTL), and a lock it forgets can be granted twice. ' +
        "Set 'maxmemory-policy noeviction' on lock nodes (a full node then refuses its vote), and keep caches on other instances.",
    })
  }

  async #checkPersistence(fields: Map<string, string>): Promise<void> {
    const want = this.#opts.persistence
    if (want === 'none') return
    const aof = fields.get('aof_enabled') === '1'
    let fsync: string | undefined
    if (aof) {
      try {
        const reply = await this.#port.send('config', ['GET', 'appendfsync'])
        fsync = Array.isArray(reply) ? String(reply[1]) : undefined
      } catch (err) {
        this.#warn({
          code: 'KUNCI_W_CONFIG_UNREADABLE',
          node: this.index,
          message: `kunci: node ${this.index}: cannot read appendfsync (${(err as Error).message}); assuming it is weaker than '${want}'.`,
        })
      }
    }
    const strongEnough = aof && (fsync === 'always' || (want === 'everysec' && fsync === 'everysec'))
    if (aof) await this.#checkAofAcl(fields)
    if (!strongEnough) {
      this.#warn({
        code: 'KUNCI_W_PERSISTENCE',
        node: this.index,
        message:
          `kunci: node ${this.index} runs with ${aof ? `appendfsync ${fsync ?? 'unknown'}` : 'AOF disabled'}, ` +
          `weaker than the '${want}' profile: after a crash it can forget locks and fencing tokens. ` +
          `Enable 'appendonly yes' + 'appendfsync ${want}', or keep restart quarantine on (the default).`,
      })
    }
  }

  /**
   * A node with AOF whose default user may not run what the lock scripts write drops every
   * script's effects when it restarts from its AOF (aof-acl.ts). A user refused ACL DRYRUN (it
   * is @admin) gets KUNCI_W_CONFIG_UNREADABLE instead, as for appendfsync, but no assumption: a
   * restricted user on a well-configured node is the common case, and a false KUNCI_W_AOF_ACL
   * would teach operators to ignore it.
   */
  async #checkAofAcl(fields: Map<string, string>): Promise<void> {
    if (!replaysAofWithAclCheck(fields)) return
    const replay = await checkAofReplay(this.#port, `${this.#opts.prefix}{aof-acl-check}`)
    if (replay.kind === 'kept') return
    if (replay.kind === 'unreadable') {
      this.#warn({
        code: 'KUNCI_W_CONFIG_UNREADABLE',
        node: this.index,
        message:
          `kunci: node ${this.index}: cannot check the default user's permissions (ACL DRYRUN: ${replay.error.message}); ` +
          'if it is off without permissions, a restart from the AOF drops every lock and fencing token scripts wrote. ' +
          "Check 'ACL GETUSER default' (see KUNCI_W_AOF_ACL in docs/errors.md), or allow this user +acl|dryrun.",
      })
      return
    }
    this.#warn({
      code: 'KUNCI_W_AOF_ACL',
      node: this.index,
      message:
        `kunci: node ${this.index} runs with AOF and a default user that may not run ${replay.command} (${replay.reason}): ` +
        'Redis replays the AOF as the default user and drops every MULTI/EXEC block it may not run, so a restart ' +
        'from the AOF loses every lock and fencing token scripts wrote (redis/redis#14541). ' +
        "Keep the default user off but give it the permissions: 'user default off resetpass ~* &* +@all'.",
    })
  }

  #warn(w: KunciWarning): void {
    publishEvent(WARNING_CHANNEL, w)
    this.#opts.onWarning(w)
  }
}

function parseInfo(info: string): Map<string, string> {
  const out = new Map<string, string>()
  for (const line of info.split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1))
  }
  return out
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)
    p.then(
      (v) => {
        clearTimeout(t)
        resolve(v)
      },
      (e) => {
        clearTimeout(t)
        reject(e)
      },
    )
  })
}
