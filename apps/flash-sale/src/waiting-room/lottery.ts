import { createHash, createHmac, randomBytes } from 'node:crypto'

/**
 * The pre-start draw, as visit.lua computes it, for audits and tests. A user who joins before
 * the sale starts gets rank = the first 48 bits (12 hex digits) of HMAC-SHA1(secret, user id),
 * the secret being the room's 64 hex characters taken as ASCII bytes; the line starts with
 * those users by ascending rank (equal ranks by user id, bytewise), then everyone else by
 * arrival. The secret is drawn when the room is set up and only its SHA-256 (the commitment) is
 * public until the start; after the start the secret is published, so anyone holding the list
 * of entrants can recompute every rank and check the order, and check that the secret is the
 * one committed to before anyone joined.
 */
export function lotteryRank(secret: string, userId: string): number {
  return Number.parseInt(createHmac('sha1', secret).update(userId).digest('hex').slice(0, 12), 16)
}

export function newLotterySecret(): { secret: string; commitment: string } {
  const secret = randomBytes(32).toString('hex')
  return { secret, commitment: lotteryCommitment(secret) }
}

export function lotteryCommitment(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** The line order the draw gives these users: by rank, then by user id (Redis' tie order). */
export function drawOrder(secret: string, userIds: readonly string[]): string[] {
  const ranked = userIds.map((u) => ({ u, rank: lotteryRank(secret, u) }))
  ranked.sort((a, b) => a.rank - b.rank || Buffer.compare(Buffer.from(a.u), Buffer.from(b.u)))
  return ranked.map((r) => r.u)
}
