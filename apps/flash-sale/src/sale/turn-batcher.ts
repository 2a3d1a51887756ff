/** A caller waiting in a batch: its input and how to answer it. */
export interface Pending<I, R> {
  input: I
  resolve: (reply: R) => void
  reject: (err: unknown) => void
}

/**
 * Groups what arrives in one event-loop turn per sale and sends it as one call when the turn
 * ends (group commit). Each caller gets its own answer.
 */
export class TurnBatcher<I, R> {
  readonly #batches = new Map<string, Pending<I, R>[]>()
  constructor(readonly flush: (productId: string, batch: Pending<I, R>[]) => Promise<void>) {}

  add(productId: string, input: I): Promise<R> {
    return new Promise((resolve, reject) => {
      let batch = this.#batches.get(productId)
      if (batch === undefined) {
        const fresh: Pending<I, R>[] = []
        batch = fresh
        this.#batches.set(productId, fresh)
        setImmediate(() => {
          this.#batches.delete(productId)
          void this.flush(productId, fresh)
        })
      }
      batch.push({ input, resolve, reject })
    })
  }
}
