/**
 * Proposes fencing tokens. A node grants a lock only for a proposal above the highest token it
 * has granted for that resource, and every node of one attempt gets the same proposal, so the
 * next holder's token is higher than the previous one's (their majorities share a node).
 *
 * Proposals come from a hybrid clock — microseconds of wall time, never below the last value
 * seen — so a proposal is almost always high enough the first time, with no extra round trip to
 * read the current token. When a node answers "fenced" (our clock was behind another
 * client's), we observe its token and the next proposal is above it.
 *
 * Tokens stay below 2^53 until the year 2255.
 */
export class FenceClock {
  #last = 0

  next(): number {
    const t = Math.max(Date.now() * 1000, this.#last + 1)
    this.#last = t
    return t
  }

  observe(fence: number): void {
    if (fence > this.#last) this.#last = fence
  }
}
