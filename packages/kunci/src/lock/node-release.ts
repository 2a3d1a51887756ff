// Release and extension on every node of a lock manager: compare-and-delete and
// compare-and-pexpire, each decided once a quorum agreed or could no longer agree.
import type { NodeVote } from '../errors.js'
import { hasSubscribers, RELEASED_CHANNEL } from './events.js'
import { EXTEND, RELEASE, RELEASE_ONE } from './lock-scripts.js'
import type { LockTarget } from './lock-target.js'
import type { Nodes } from './node-link.js'
import { gather } from './quorum.js'
import { NO_VOTES, type VoteRules, votesOf } from './votes.js'

/** Compare-and-delete on every node; counts the nodes on which all of the lock's keys were ours. */
export async function releaseAll(
  nodes: Nodes,
  target: LockTarget,
  token: string,
): Promise<{ released: number; answered: number; votes: NodeVote[] }> {
  const one = target.lockKeys.length === 1
  const script = one ? RELEASE_ONE : RELEASE
  const args = one ? [token] : [token, String(target.lockKeys.length)]
  const requests: Promise<unknown>[] = new Array(nodes.links.length)
  // The quorum-deciding node first (send-order.ts).
  for (const i of nodes.order.order(performance.now()))
    requests[i] = nodes.links[i]!.call({ script, keys: target.releaseKeys, args })
  const all = target.lockKeys.length
  const lost = nodes.links.length - nodes.quorum
  // Decided once a quorum released or too many nodes lacked our token; a dead node then
  // costs nothing (the command still reaches the others, and the rest whenever they answer).
  const outcomes = await gather(requests, nodes.nodeTimeoutMs, (out) => {
    let ok = 0
    let missing = 0
    for (const o of out) if (o?.ok) Number(o.value) === all ? ok++ : missing++
    return ok >= nodes.quorum || missing > lost
  })
  let released = 0
  let answered = 0
  for (const o of outcomes) {
    if (!o?.ok) continue
    answered++
    if (Number(o.value) === all) released++
  }
  // Per-node votes only when they are reported: a failed release, or a listener.
  const votes =
    released < nodes.quorum || hasSubscribers(RELEASED_CHANNEL)
      ? votesOf(nodes.links, outcomes, {
          vote: false,
          statusOf: (v) => (Number(v) === all ? 'released' : 'not-owner'),
        })
      : NO_VOTES
  return { released, answered, votes }
}

export interface ExtendRequest {
  readonly target: LockTarget
  readonly token: string
  /** The lock's fencing token: a node sets a missing key again only if it granted nobody since. */
  readonly fence: number
  readonly ttlMs: number
}

/**
 * Compare-and-pexpire on every node (setting the key again where it is missing and the fence
 * allows, see extend.lua); counts the nodes that extended every key of the lock.
 */
export async function extendAll(
  nodes: Nodes,
  { target, token, fence, ttlMs }: ExtendRequest,
): Promise<{ extended: number; answered: number; votes: NodeVote[]; start: number }> {
  const start = performance.now()
  // As strings once, not once per node by the client (see attemptAcquire).
  const args = [token, String(ttlMs), String(fence), String(target.lockKeys.length)]
  const requests: (Promise<unknown> | undefined)[] = new Array(nodes.links.length).fill(undefined)
  for (const i of nodes.order.order(start)) {
    const l = nodes.links[i]!
    if (l.canVote(start)) requests[i] = l.call({ script: EXTEND, keys: target.extendKeys, args, vote: true })
  }
  const refusable = nodes.links.length - nodes.quorum
  const outcomes = await gather(requests, nodes.nodeTimeoutMs, (out) => {
    let ok = 0
    let no = 0
    for (const o of out) if (o?.ok) Number(o.value) === 1 ? ok++ : no++
    return ok >= nodes.quorum || no > refusable
  })
  let extended = 0
  let answered = 0
  for (const o of outcomes) {
    if (!o?.ok) continue
    answered++
    if (Number(o.value) === 1) extended++
  }
  const votes = votesOf(nodes.links, outcomes, EXTEND_VOTES)
  return { extended, answered, votes, start }
}

const EXTEND_VOTES: VoteRules = { vote: true, statusOf: (v) => (Number(v) === 1 ? 'granted' : 'not-owner') }
