/**
 * How the per-node outcomes of one lock operation become the `votes` of its result and errors:
 * the one mapping of acquire, release and extend (each gives its own reply meaning).
 */
import type { NodeVote, NodeVoteStatus } from '../errors.js'
import { type NodeLink, StaleVoteError } from './node-link.js'
import type { Outcome } from './quorum.js'

export const notConnected = new Error('node connection is not ready (connecting, or its state check failed)')

/** Votes of a result nobody looks at (a grant's, unless someone listens). */
export const NO_VOTES: NodeVote[] = []

/** How one operation's per-node outcomes become votes: the one mapping of every operation. */
export interface VoteRules {
  /**
   * A vote-carrying request (acquire, extend): a node that may not vote was not asked
   * (`quarantined`, or `error` if its connection is not checked yet), and a failure on a
   * quarantined node, or a reply from an older connection, is `quarantined`.
   */
  readonly vote: boolean
  /** The status a node's reply means. */
  statusOf(value: unknown): NodeVoteStatus
}

export function votesOf(
  links: readonly NodeLink[],
  outcomes: readonly Outcome<unknown>[],
  rules: VoteRules,
): NodeVote[] {
  const votes: NodeVote[] = new Array(links.length)
  for (let i = 0; i < links.length; i++) votes[i] = voteOf(links[i]!, outcomes[i], rules)
  return votes
}

export function voteOf(link: NodeLink, o: Outcome<unknown>, rules: VoteRules): NodeVote {
  const node = link.index
  if (o === undefined) {
    return rules.vote && link.quarantined
      ? { node, status: 'quarantined' }
      : { node, status: 'error', error: notConnected }
  }
  if (o.ok) return { node, status: rules.statusOf(o.value) }
  if (o.undecided) return { node, status: 'pending' }
  const quarantined = rules.vote && (link.quarantined || o.error instanceof StaleVoteError)
  return { node, status: quarantined ? 'quarantined' : o.timedOut ? 'timeout' : 'error', error: o.error }
}
