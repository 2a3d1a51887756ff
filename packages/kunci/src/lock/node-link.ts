import { keySlot } from '../cluster/slot.js'
import { UnexpectedReplyError } from '../errors.js'
import { isClusterClient, type LuaScript, type RedisClient, runScriptTo } from '../redis/lua-script.js'
import { publishEvent, QUARANTINE_CHANNEL, WARNING_CHANNEL } from './events.js'
import type { KunciWarning, PersistenceProfile } from './lock-options.js'

interface Pending {
  readonly script: LuaScript
  readonly vote: boolean
  /** The connection the request was made on; a vote from a newer one is not counted. */
  readonly incarnation: number
  readonly keys: readonly string[]
  readonly args: readonly (string | number)[]
  readonly resolve: (reply: unknown) => void
  readonly reject: (err: Error) => void
}

/** Rejection of a vote-carrying request by a node that may not vote (restart quarantine, unchecked). */
export const notVoting = new Error('node may not vote (restart quarantine, or its restart check failed)')

/** A reply to a vote that was asked for on an older connection of the node. */
export class StaleVoteError extends Error {
  constructor(readonly reply: unknown) {
    super('the node reconnected (it may have restarted) since this vote was asked for')
  }
}

/** Upper bound on requests folded into one script call, so one call never blocks a node for long. */
const MAX_BATCH = 256

/**
 * The bound for a manager of ONE node (RedisLock). With every caller on one connection, a tick's
 * requests in one call move in lockstep: the whole wave goes to the server, the client idles while
 * it runs, then the server idles while the client handles the replies and builds the next wave.
 * At concurrency 64 the client was busy 59 % and the server 44 % of the time, with one call of 64
 * requests in flight. In chunks of 16 the replies to the first chunk are handled while the server
 * runs the next, and the same machine did ~70k acquire+release/s instead of ~42k
 * (bench/RESULTS.md, issue 9). With five nodes the servers already work in parallel with each
 * other and the client, and smaller chunks only added calls: no gain there, so Redlock keeps
 * MAX_BATCH.
 */
export const SOLO_MAX_BATCH = 16

export interface NodeLinkOptions {
  readonly quarantine: boolean
  readonly maxTtlMs: number
  readonly persistence: PersistenceProfile
  readonly nodeTimeoutMs: number
  readonly onWarning: (warning: KunciWarning) => void
}

/**
 * One Redis node as the lock manager sees it: its client, whether it may vote, and a batcher
 * that folds requests made in the same tick into one script call.
 *
 * Restarts are caught from the connection: ioredis emits `close` when the socket drops, which
 * bumps `incarnation` and stops the node voting until `INFO` on the new connection has been
 * read. A changed `run_id`, or an uptime below maxTtlMs, means the node may have lost locks it
 * granted, so it sits out (quarantine) until maxTtlMs after its start. A reply that arrives for
 * an older incarnation is not counted: ioredis may resend a command to the restarted server.
 */
export class NodeLink {
  readonly index: number
  readonly client: RedisClient
  readonly isCluster: boolean
  #opts: NodeLinkOptions
  #incarnation = 0
  #verified = false
  #verifying: Promise<void> | undefined
  #quarantinedUntil = 0
  #runId: string | undefined
  #warnedRunId: string | undefined
  #queue: Pending[] = []
  #flushScheduled = false
  #flushAfterVerify = false
  #closed = false
  /** Scripts sent with SCRIPT LOAD on the current connection (see #preload). */
  #loaded = new Set<string>()

  readonly #maxBatch: number

  /** `maxBatch`: most requests in one script call (MAX_BATCH, or SOLO_MAX_BATCH for one node). */
  constructor(index: number, client: RedisClient, opts: NodeLinkOptions, maxBatch = MAX_BATCH) {
    this.index = index
    this.#maxBatch = maxBatch
    this.client = client
    this.isCluster = isClusterClient(client)
    this.#opts = opts
    client.on('close', this.#onClose)
    client.on('ready', this.#onReady)
    if (this.isCluster) {
      // A cluster fails over to replicas instead of restarting empty; the client follows it.
      this.#verified = true
    } else if (client.status === 'ready') {
      void this.#startVerify()
    }
  }

  get incarnation(): number {
    return this.#incarnation
  }

  /** May this node's answer count toward a quorum right now? */
  canVote(now = performance.now()): boolean {
    return this.#verified && now >= this.#quarantinedUntil
  }

  /** Why the node cannot vote, for the per-node outcome. */
  get quarantined(): boolean {
    return this.#verified && performance.now() < this.#quarantinedUntil
  }

  /** Resolves once the node has been checked (or the check failed); used before the first vote. */
  whenVerified(): Promise<void> | undefined {
    if (this.#verified || this.#closed) return undefined
    return this.#verifying ?? this.#startVerify()
  }

  /** Has INFO been read on the current connection? Until then requests wait in our queue. */
  get verified(): boolean {
    return this.#verified
  }

  /**
   * Queues one request; requests queued in the same tick share a script call, and requests
   * reach the node in the order they were made. With `vote`, the request is an acquire or
   * extend: it is rejected instead of sent if the node turns out to be quarantined.
   */
  call(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    vote = false,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ script, keys, args, vote, incarnation: this.#incarnation, resolve, reject })
      if (!this.#flushScheduled) {
        this.#flushScheduled = true
        queueMicrotask(this.#flush)
      }
    })
  }

  detach(): void {
    this.#closed = true
    this.client.off('close', this.#onClose)
    this.client.off('ready', this.#onReady)
  }

  #onClose = (): void => {
    this.#incarnation++
    // The next connection may reach a restarted node, whose script cache is empty.
    this.#loaded.clear()
    if (!this.isCluster) this.#verified = false
  }

  #onReady = (): void => {
    if (!this.isCluster) void this.#startVerify()
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
    try {
      info = await withTimeout((this.client as import('ioredis').Redis).info(), this.#opts.nodeTimeoutMs * 5)
    } catch {
      return // stays unverified; the next `ready` or vote tries again
    }
    if (incarnation !== this.#incarnation || this.#closed) return
    const fields = parseInfo(info)
    const runId = fields.get('run_id')
    const uptimeMs = Number(fields.get('uptime_in_seconds') ?? '0') * 1000
    if (this.#opts.quarantine) {
      const restarted = this.#runId !== undefined && runId !== this.#runId
      // uptime has 1 s resolution and is rounded down: we may wait up to 1 s longer than needed.
      const remaining = this.#opts.maxTtlMs - uptimeMs
      if ((restarted || this.#runId === undefined) && remaining > 0) {
        this.#quarantinedUntil = performance.now() + remaining
        publishEvent(QUARANTINE_CHANNEL, { node: this.index, runId, restarted, quarantineMs: remaining })
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
        const reply = (await (this.client as import('ioredis').Redis).config(
          'GET',
          'appendfsync',
        )) as string[]
        fsync = reply[1]
      } catch (err) {
        this.#warn({
          code: 'KUNCI_W_CONFIG_UNREADABLE',
          node: this.index,
          message: `kunci: node ${this.index}: cannot read appendfsync (${(err as Error).message}); assuming it is weaker than '${want}'.`,
        })
      }
    }
    const strongEnough = aof && (fsync === 'always' || (want === 'everysec' && fsync === 'everysec'))
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

  #warn(w: KunciWarning): void {
    publishEvent(WARNING_CHANNEL, w)
    this.#opts.onWarning(w)
  }

  #flush = (): void => {
    this.#flushScheduled = false
    if (!this.#verified && !this.#closed) {
      // Hold everything until we know whether the node restarted; a hold keeps call order,
      // so a release can never overtake the acquire it cleans up after.
      if (!this.#flushAfterVerify) {
        this.#flushAfterVerify = true
        const v = this.#verifying ?? this.#startVerify()
        void v.finally(() => {
          this.#flushAfterVerify = false
          this.#drain()
        })
      }
      return
    }
    this.#drain()
  }

  #drain(): void {
    const queue = this.#queue
    if (queue.length === 0) return
    this.#queue = []
    const now = performance.now()
    if (queue.length === 1) {
      // A lone request (every request at concurrency 1): sent as it is, no run to build.
      const p = queue[0]!
      if (p.vote && !this.canVote(now)) p.reject(notVoting)
      else this.#sendRun(queue)
      return
    }
    let run: Pending[] = []
    let runFor: LuaScript | undefined
    for (const p of queue) {
      if (p.vote && !this.canVote(now)) {
        p.reject(notVoting)
        continue
      }
      // Lean single-request scripts share a run with their batched form.
      const s = p.script.batchAs?.script ?? p.script
      if (run.length > 0 && (runFor !== s || run.length === this.#maxBatch)) {
        this.#sendRun(run)
        run = []
      }
      runFor = s
      run.push(p)
    }
    if (run.length > 0) this.#sendRun(run)
  }

  #sendRun(run: Pending[]): void {
    const script = run[0]!.script
    if (!this.isCluster || run.length === 1) {
      this.#send(script, run)
      return
    }
    // A script may only touch keys of one slot on a cluster: one call per slot.
    const bySlot = new Map<number, Pending[]>()
    for (const p of run) {
      const slot = keySlot(p.keys[0]!)
      const group = bySlot.get(slot)
      if (group) group.push(p)
      else bySlot.set(slot, [p])
    }
    for (const group of bySlot.values()) this.#send(script, group)
  }

  #send(first: LuaScript, batch: Pending[]): void {
    let script = first
    let keys: string[]
    let args: (string | number)[]
    if (batch.length === 1) {
      const only = batch[0]!
      script = only.script
      keys = only.keys as string[]
      // A lean script takes its request's arguments as they are; a batched one a count first.
      args = script.batchAs ? (only.args as (string | number)[]) : [1, ...only.args]
    } else {
      script = first.batchAs?.script ?? first
      keys = []
      args = [batch.length]
      for (const p of batch) {
        for (const k of p.keys) keys.push(k)
        const packed = p.script.batchAs ? p.script.batchAs.pack(p.args) : p.args
        for (const a of packed) args.push(a)
      }
    }
    const width = script.replyWidth
    const decode = batch.length === 1 ? script.decodeLone : undefined
    this.#preload(script)
    runScriptTo(
      this.client,
      script,
      keys,
      args,
      (reply) => {
        let values: unknown
        if (decode) {
          // A lean script's own reply (an integer where that suffices): one request's value.
          values = decode(reply)
          if (values === undefined) {
            batch[0]!.reject(new UnexpectedReplyError(script.name, reply))
            return
          }
        } else if (!Array.isArray(reply) || reply.length !== batch.length * width) {
          const err = new UnexpectedReplyError(script.name, reply)
          for (const p of batch) p.reject(err)
          return
        }
        for (let i = 0; i < batch.length; i++) {
          const p = batch[i]!
          const r = reply as unknown[]
          const value = decode ? values : width === 1 ? r[i] : r.slice(i * width, i * width + width)
          // The node may have restarted since the vote was asked for (ioredis resends commands
          // after a reconnect): such a vote is not counted, but the value is still passed on
          // so that a late grant can be cleaned up.
          if (p.vote && p.incarnation !== this.#incarnation) p.reject(new StaleVoteError(value))
          else p.resolve(value)
        }
      },
      (err: Error) => {
        for (const p of batch) p.reject(err)
      },
    )
  }

  /**
   * Sends SCRIPT LOAD ahead of a script's first EVALSHA on this connection. Without it the first
   * use answers NOSCRIPT and is re-sent as EVAL a round trip later, after calls made behind it
   * whose scripts were cached: a release could then run on a node before the hand-over it
   * follows, and that node would keep the released lock for its whole TTL. Commands on one
   * connection run in order, so the load needs no round trip of its own. Not on a Cluster
   * client (it would send SCRIPT LOAD to one node, not the key's): there a first use still
   * falls back to EVAL. A SCRIPT FLUSH on a live connection is not seen either.
   */
  #preload(script: LuaScript): void {
    if (this.isCluster || this.#loaded.has(script.sha)) return
    this.#loaded.add(script.sha)
    // A failed load only costs the EVAL fallback.
    ;(this.client as import('ioredis').Redis).script('LOAD', script.source).catch(() => {})
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
