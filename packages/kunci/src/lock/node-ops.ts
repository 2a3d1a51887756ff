// One acquisition attempt on every node of a lock manager (the same token and fencing proposal
// everywhere), with the clean-up of a failed attempt: partial grants released, queued waiters
// taken out of the queues. Release and extension are node-release.ts.
import { type NodeVote, type NodeVoteStatus, UnexpectedReplyError } from '../errors.js'
import { hasSubscribers, NODE_ERROR_CHANNEL, publishEvent, RELEASED_CHANNEL } from './events.js'
import { ACQUIRE, ACQUIRE_ONE, Acquire, type AcquireStatus, RELEASE, UNQUEUE } from './lock-scripts.js'
import type { LockTarget } from './lock-target.js'
import { type Nodes, StaleVoteError } from './node-link.js'
import { gather, type Outcome } from './quorum.js'
import { randomToken } from './tokens.js'
import { NO_VOTES, type VoteRules, voteOf, votesOf } from './votes.js'

export type AttemptResult =
  | {
      readonly kind: 'granted'
      readonly token: string
      readonly fence: number
      /** performance.now() at which the lock stops being valid locally. */
      readonly validUntil: number
      readonly votes: NodeVote[]
      /** Hand-over: nodes that answered and had no trace of prev (it expired or was taken there). */
      readonly prevMissingOn: number
    }
  | {
      readonly kind: 'held' | 'fenced' | 'outage' | 'expired' | 'yielded'
      readonly votes: NodeVote[]
      /** For `held`: the longest remaining TTL reported, in ms. */
      readonly pttl: number
      readonly prevMissingOn: number
    }

/** status, pttl or fence, resources on which prev was held: see acquire.lua. */
type AcquireReply = [AcquireStatus, number, number]

const statusOf = (v: unknown): AcquireStatus => (v as AcquireReply)[0]

/**
 * One acquisition attempt on all nodes at once: the same random token and the same fencing
 * proposal everywhere, each node answering within nodeTimeoutMs. Decides as soon as a quorum
 * granted or can no longer grant. On failure, partial grants are released on every node that
 * may hold one before this returns. With `prev`, the attempt hands the lock over from the
 * holder `prev` in the same round trip (release + acquire in one script call).
 */
export interface AttemptOptions {
  readonly target: LockTarget
  readonly ttlMs: number
  /** The drift allowance subtracted from the validity (ttl × driftFactor + driftConstantMs). */
  readonly driftMs: number
  /** Hand over from this holder token (same process), in the round trip of its release. */
  readonly prev?: string
  /** With prev: give way if clients of other processes wait. */
  readonly yieldToOthers?: boolean
  /** Join the node's wait queue if the lock is held, so a release wakes us (and only us) in turn. */
  readonly waiter?: { readonly id: string; readonly since: number; readonly queued: boolean }
}

export async function attemptAcquire(nodes: Nodes, options: AttemptOptions): Promise<AttemptResult> {
  const { target, ttlMs, driftMs } = options
  const { links, quorum } = nodes
  const n = links.length
  const prev = options.prev ?? ''
  const w = options.waiter
  const token = randomToken()
  const fence = nodes.clock.next()
  const lean = prev === '' && target.resources.length === 1
  const script = lean ? ACQUIRE_ONE : ACQUIRE
  // Numbers as strings made once here: the client would turn each number into a string again
  // for every node's command, and the fence and `since` are beyond V8's small-integer cache
  // (16 digits and 13), ten conversions per acquire+release on five nodes.
  const fenceArg = String(fence)
  const ttlArg = String(ttlMs)
  const args = lean
    ? w
      ? [token, ttlArg, fenceArg, w.id, String(w.since), w.queued ? '1' : '0']
      : [token, ttlArg, fenceArg]
    : [
        token,
        ttlArg,
        fenceArg,
        String(target.resources.length),
        prev === '' ? '' : `${prev}|${options.yieldToOthers ? '1' : '0'}`,
        w ? `${w.id}|${w.since}|${w.queued ? '1' : '0'}` : '',
      ]
  const start = performance.now()
  const requests: (Promise<unknown> | undefined)[] = new Array(n)
  // Every request is queued now, in this tick; each node link keeps call order, so a later
  // release or hand-over always reaches a node after this acquire.
  // The quorum-deciding node first (send-order.ts).
  for (const i of nodes.order.order(start)) {
    const link = links[i]!
    // An unchecked node (start-up, reconnect) queues the request until its check is done.
    if (!link.verified || link.canVote(start)) {
      requests[i] = link.call({ script, keys: target.acquireKeys, args, vote: true })
    }
  }
  let granted = 0
  let refused = 0
  // A waiter queues on every node that refuses it, also on nodes that answer after the
  // decision: if it wins, it leaves those queues too (see unqueue.lua).
  let won: boolean | undefined
  const lateHeld: number[] = []
  const late = w
    ? (i: number, v: unknown) => {
        if (statusOf(v) !== Acquire.HELD) return
        if (won === undefined) lateHeld.push(i)
        else if (won) unqueueOn(nodes, target, w.id, i)
      }
    : undefined
  const outcomes = await gather(
    requests,
    nodes.nodeTimeoutMs,
    (out) => {
      granted = 0
      refused = 0
      for (const o of out) {
        if (o === undefined) continue
        if (o.ok && statusOf(o.value) === Acquire.GRANTED) granted++
        else refused++
      }
      return granted >= quorum || refused > n - quorum
    },
    late,
  )
  const now = performance.now()
  let grants = 0
  let held = 0
  let yielded = 0
  // -1: no holder reported a TTL (a key without expiry is not an expiry to wait for).
  let pttl = -1
  let prevMissingOn = 0
  for (let i = 0; i < n; i++) {
    const o = outcomes[i]
    if (o?.ok) {
      const r = checkReply(o.value)
      if (prev !== '' && r[2] < target.resources.length) prevMissingOn++
      if (r[0] === Acquire.GRANTED) grants++
      else if (r[0] === Acquire.HELD) {
        held++
        if (r[1] > pttl) pttl = r[1]
      } else if (r[0] === Acquire.FENCED) {
        nodes.clock.observe(r[1])
      } else yielded++
    } else if (o && hasSubscribers(NODE_ERROR_CHANNEL)) {
      const { status } = voteOf(links[i]!, o, ACQUIRE_VOTES)
      if (!o.undecided) publishEvent(NODE_ERROR_CHANNEL, { node: i, op: 'acquire', status, error: o.error })
      // Decided without this node: still report it if it fails or stays silent past the time-out.
      else reportStraggler(requests[i]!, i, nodes.nodeTimeoutMs, start)
    }
  }
  if (grants >= quorum) {
    const validUntil = start + ttlMs - driftMs
    if (validUntil > now) {
      if (prev !== '') {
        // Nodes still answering run the hand-over script too (it overwrites prev); only nodes
        // that failed or timed out may keep prev until its TTL: release it there.
        const rest = outcomes.flatMap((o, i) => (o && !o.ok && !o.undecided ? [i] : []))
        if (rest.length > 0) void releaseOn(nodes, target, prev, rest, '')
      }
      // A waiter joined the queue of every node that refused it (in the same script call):
      // leave those queues now that it holds the lock, on those nodes only (see unqueue.lua).
      if (w) {
        won = true
        if (held > 0) unqueueWhereHeld(nodes, target, w.id, outcomes)
        for (const i of lateHeld) unqueueOn(nodes, target, w.id, i)
      }
      // Votes are built only when someone will look at them (a grant's are rarely wanted).
      const votes = hasSubscribers(RELEASED_CHANNEL) ? votesOf(links, outcomes, ACQUIRE_VOTES) : NO_VOTES
      return { kind: 'granted', token, fence, validUntil, votes, prevMissingOn }
    }
  }
  won = false
  const votes = votesOf(links, outcomes, ACQUIRE_VOTES)
  // Release what this attempt was granted. Nodes that had not answered yet are cleaned up when
  // they do (a paused node answers late), instead of costing every node a second command.
  const cleanup: number[] = []
  for (let i = 0; i < n; i++) {
    const o = outcomes[i]
    if (o?.ok) {
      if (statusOf(o.value) === Acquire.GRANTED) cleanup.push(i)
    } else if (o) {
      // Also a grant that arrives on a newer connection (ioredis resends unanswered commands
      // after a reconnect) must be cleaned up.
      requests[i]!.then(
        (v) => {
          if (statusOf(v) === Acquire.GRANTED) void releaseOn(nodes, target, token, [i], '')
        },
        (err: unknown) => {
          if (err instanceof StaleVoteError && statusOf(err.reply) === Acquire.GRANTED) {
            void releaseOn(nodes, target, token, [i], '')
          }
        },
      )
    }
  }
  // A hand-over whose prev survives on a node that did not answer: release prev there too.
  await releaseOn(nodes, target, token, cleanup, prev)
  // An outage is when the nodes that failed (time-out, error, quarantine) alone rule out a
  // quorum; otherwise other holders (or a stale fence) are why we lost.
  let unreachable = 0
  for (const v of votes)
    if (v.status === 'timeout' || v.status === 'error' || v.status === 'quarantined') unreachable++
  const kind =
    grants >= quorum
      ? 'expired'
      : yielded > 0
        ? 'yielded'
        : unreachable > n - quorum
          ? 'outage'
          : held > 0
            ? 'held'
            : 'fenced'
  return { kind, votes, pttl, prevMissingOn }
}

/** Nodes that refused a winning waiter (it queued there): take it out of their queues. */
function unqueueWhereHeld(
  nodes: Nodes,
  target: LockTarget,
  id: string,
  outcomes: readonly Outcome<unknown>[],
) {
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]
    if (o?.ok && statusOf(o.value) === Acquire.HELD) unqueueOn(nodes, target, id, i)
  }
}

function unqueueOn(nodes: Nodes, target: LockTarget, id: string, node: number): void {
  // Best effort: the queue has a TTL.
  nodes.links[node]!.call({
    script: UNQUEUE,
    keys: target.releaseKeys,
    args: [id, target.lockKeys.length],
  }).catch(() => {})
}

async function releaseOn(nodes: Nodes, target: LockTarget, token: string, on: number[], prev: string) {
  if (on.length === 0 && prev === '') return
  const requests: Promise<unknown>[] = []
  const keys = target.releaseKeys
  for (const i of on)
    requests.push(
      nodes.links[i]!.call({ script: RELEASE, keys, args: [token, String(target.lockKeys.length)] }),
    )
  if (prev !== '') {
    for (const l of nodes.links)
      requests.push(l.call({ script: RELEASE, keys, args: [prev, String(target.lockKeys.length)] }))
  }
  await gather(requests, nodes.nodeTimeoutMs)
}

/** Only when someone listens on the node-error channel: costs a timer per silent node then. */
function reportStraggler(p: Promise<unknown>, node: number, timeoutMs: number, start: number): void {
  let settled = false
  const timer = setTimeout(
    () => {
      if (!settled) publishEvent(NODE_ERROR_CHANNEL, { node, op: 'acquire', status: 'timeout' })
    },
    Math.max(0, start + timeoutMs - performance.now()),
  )
  timer.unref()
  p.then(
    () => {
      settled = true
      clearTimeout(timer)
    },
    (error: Error) => {
      settled = true
      clearTimeout(timer)
      publishEvent(NODE_ERROR_CHANNEL, { node, op: 'acquire', status: 'error', error })
    },
  )
}

const ACQUIRE_STATUS: Record<AcquireStatus, NodeVoteStatus> = {
  [Acquire.HELD]: 'held',
  [Acquire.GRANTED]: 'granted',
  [Acquire.FENCED]: 'fenced',
  [Acquire.YIELDED]: 'not-owner',
}
const ACQUIRE_VOTES: VoteRules = { vote: true, statusOf: (v) => ACQUIRE_STATUS[statusOf(v)] ?? 'not-owner' }

function checkReply(v: unknown): AcquireReply {
  if (!Array.isArray(v) || v.length !== 3 || typeof v[0] !== 'number')
    throw new UnexpectedReplyError('acquire', v)
  return v as AcquireReply
}
