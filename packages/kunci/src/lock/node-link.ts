import { keySlot } from '../cluster/slot.js'
import { UnexpectedReplyError } from '../errors.js'
import type { LuaScript } from '../redis/lua-script.js'
import type { RedisPort } from '../redis/port.js'
import { runScriptTo } from '../redis/script.js'
import type { FenceClock } from './fence-clock.js'
import { NodeHealth, type NodeHealthOptions } from './node-health.js'
import type { SendOrder } from './send-order.js'

/** The nodes of one lock manager and what every operation on them needs. */
export interface Nodes {
  readonly links: readonly NodeLink[]
  readonly quorum: number
  readonly nodeTimeoutMs: number
  readonly clock: FenceClock
  /** The order an operation's requests go out in (send-order.ts). */
  readonly order: SendOrder
}

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

export type NodeLinkOptions = NodeHealthOptions

/** One request to a node: a script, its keys and arguments, and whether it carries a vote. */
export interface NodeRequest {
  readonly script: LuaScript
  readonly keys: readonly string[]
  readonly args: readonly (string | number)[]
  /** An acquire or extend: rejected instead of sent if the node may not vote. @defaultValue false */
  readonly vote?: boolean
}

/**
 * One Redis node as the lock manager sees it: its port, its health (node-health.ts: restart
 * check, quarantine, warnings), and a batcher that folds requests made in the same tick into one
 * script call (but for a tick's first request while the link is not batching, written at once),
 * keeping the order in which they were made.
 */
export class NodeLink {
  readonly index: number
  readonly port: RedisPort
  readonly isCluster: boolean
  readonly health: NodeHealth
  #queue: Pending[] = []
  #flushScheduled = false
  /** The last script call carried one request: the link is not batching (see call()). */
  #lastRunLone = false
  #flushAfterVerify = false
  readonly #maxBatch: number
  readonly #rtt: SendOrder | undefined

  /**
   * `maxBatch`: most requests in one script call (MAX_BATCH, or SOLO_MAX_BATCH for one node).
   * `rtt`: told every script call's round trip, to order the sends (none for a lone node).
   */
  constructor(index: number, port: RedisPort, opts: NodeLinkOptions, maxBatch = MAX_BATCH, rtt?: SendOrder) {
    this.index = index
    this.#maxBatch = maxBatch
    this.#rtt = rtt
    this.port = port
    this.isCluster = port.cluster !== undefined
    this.health = new NodeHealth(index, port, opts)
  }

  /** May this node's answer count toward a quorum right now? */
  canVote(now = performance.now()): boolean {
    return this.health.canVote(now)
  }

  /** Has INFO been read on the current connection? Until then requests wait in our queue. */
  get verified(): boolean {
    return this.health.verified
  }

  get quarantined(): boolean {
    return this.health.quarantined
  }

  /**
   * Queues one request; requests queued in the same tick share a script call, and requests
   * reach the node in the order they were made. A vote-carrying request is rejected instead of
   * sent if the node turns out to be quarantined.
   */
  call({ script, keys, args, vote = false }: NodeRequest): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const p: Pending = { script, keys, args, vote, incarnation: this.health.incarnation, resolve, reject }
      // Sent at once when the link is not batching: its last call carried one request, and this
      // is the tick's first request (no flush due, nothing queued, so none is overtaken). At
      // concurrency 1 an operation's first write then leaves while the others are still being
      // built, instead of after all of them and a microtask: the five writes of an acquire went
      // out ~40 µs earlier on equal links (bench/locks/critical-path.ts). The tick's flush is
      // scheduled all the same, so the rest of the tick's requests queue behind it and share
      // one call, as under load.
      const atOnce =
        !this.#flushScheduled && this.#lastRunLone && this.#queue.length === 0 && this.health.verified
      if (atOnce) {
        if (vote && !this.canVote()) reject(notVoting)
        else this.#sendRun([p])
      } else this.#queue.push(p)
      if (!this.#flushScheduled) {
        this.#flushScheduled = true
        queueMicrotask(this.#flush)
      }
    })
  }

  detach(): void {
    this.health.detach()
  }

  #flush = (): void => {
    this.#flushScheduled = false
    const health = this.health
    if (!health.verified && !health.closed) {
      // Hold everything until we know whether the node restarted; a hold keeps call order,
      // so a release can never overtake the acquire it cleans up after.
      if (!this.#flushAfterVerify) {
        this.#flushAfterVerify = true
        const v = health.whenVerified() ?? Promise.resolve()
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
    this.#lastRunLone = run.length === 1
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
      args = script.batchAs ? (only.args as (string | number)[]) : ['1', ...only.args]
    } else {
      script = first.batchAs?.script ?? first
      keys = []
      args = [String(batch.length)]
      for (const p of batch) {
        for (const k of p.keys) keys.push(k)
        const packed = p.script.batchAs ? p.script.batchAs.pack(p.args) : p.args
        for (const a of packed) args.push(a)
      }
    }
    const width = script.replyWidth
    const decode = batch.length === 1 ? script.decodeLone : undefined
    const rtt = this.#rtt
    const sentAt = rtt ? performance.now() : 0
    runScriptTo(
      this.port,
      script,
      keys,
      args,
      (reply) => {
        rtt?.observe(this.index, performance.now() - sentAt)
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
          if (p.vote && p.incarnation !== this.health.incarnation) p.reject(new StaleVoteError(value))
          else p.resolve(value)
        }
      },
      (err: Error) => {
        for (const p of batch) p.reject(err)
      },
    )
  }
}
