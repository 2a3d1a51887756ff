/** A caller waiting in a batch: its input and how to answer it. */
export interface Pending<I, R> {
  input: I
  resolve: (reply: R) => void
  reject: (err: unknown) => void
}

/**
 * Sends one batch. Calls `release()` once the batch no longer needs the resource it was sent to
 * (its script calls answered; a confirmation round that follows is not the script's): the next
 * batch of the key may go from then on. Settling the returned promise releases too.
 */
export type FlushBatch<I, R> = (key: string, batch: Pending<I, R>[], release: () => void) => Promise<void>

export interface TurnBatcherOptions {
  /**
   * While a key's last call is out and younger than this (ms), what arrives for that key waits
   * for its answer and goes in the next call, together with everything else that arrived
   * meanwhile (group commit): under load a call carries what came during the previous round
   * trip, not one event-loop turn's worth. A call out longer than this (a slow or failing node)
   * no longer holds the next one back: it is sent at once, beside it, as without the hold.
   * 0: every turn sends its own call. @defaultValue 20
   */
  holdWhileInFlightMs?: number
}

interface KeyState<I, R> {
  batch: Pending<I, R>[]
  /** A send is due (next turn, or when the hold runs out). */
  scheduled: boolean
  timer: NodeJS.Timeout | undefined
  /** The newest call out for this key, and when it was sent. */
  inFlight: object | undefined
  sentAt: number
}

/**
 * Groups what arrives per key (a sale) and sends it as one call: at the end of the event-loop
 * turn, or, while the key's previous call is still out, when that call is answered (group
 * commit). Each caller gets its own answer. A key with nothing waiting and nothing out is
 * forgotten, so made-up keys do not grow it.
 */
export class TurnBatcher<I, R> {
  readonly #keys = new Map<string, KeyState<I, R>>()
  readonly #holdMs: number

  constructor(
    readonly flush: FlushBatch<I, R>,
    options: TurnBatcherOptions = {},
  ) {
    const hold = options.holdWhileInFlightMs ?? 20
    if (!Number.isFinite(hold) || hold < 0)
      throw new RangeError(`holdWhileInFlightMs must be a number ≥ 0 (got ${hold})`)
    this.#holdMs = hold
  }

  add(key: string, input: I): Promise<R> {
    return new Promise((resolve, reject) => {
      let st = this.#keys.get(key)
      if (st === undefined) {
        st = { batch: [], scheduled: false, timer: undefined, inFlight: undefined, sentAt: 0 }
        this.#keys.set(key, st)
      }
      st.batch.push({ input, resolve, reject })
      if (st.scheduled) return
      st.scheduled = true
      const held = st.inFlight === undefined ? 0 : this.#holdMs - (performance.now() - st.sentAt)
      if (held <= 0) setImmediate(() => this.#send(key))
      else st.timer = setTimeout(() => this.#send(key), Math.ceil(held))
    })
  }

  #send(key: string): void {
    const st = this.#keys.get(key)
    if (st === undefined) return
    clearTimeout(st.timer)
    st.timer = undefined
    st.scheduled = false
    const batch = st.batch
    if (batch.length === 0) {
      this.#forgetIfIdle(key, st)
      return
    }
    st.batch = []
    const token = {}
    st.inFlight = token
    st.sentAt = performance.now()
    let released = false
    const release = () => {
      if (released) return
      released = true
      // An older call answering after a newer one went out changes nothing.
      if (st.inFlight !== token) return
      st.inFlight = undefined
      if (st.batch.length === 0) {
        this.#forgetIfIdle(key, st)
        return
      }
      // What waited behind this call goes now, with whatever else arrives in this turn.
      clearTimeout(st.timer)
      st.timer = undefined
      st.scheduled = true
      setImmediate(() => this.#send(key))
    }
    let sent: Promise<void>
    try {
      sent = this.flush(key, batch, release)
    } catch (err) {
      for (const item of batch) item.reject(err)
      release()
      return
    }
    void sent.then(release, (err: unknown) => {
      for (const item of batch) item.reject(err)
      release()
    })
  }

  #forgetIfIdle(key: string, st: KeyState<I, R>): void {
    if (st.batch.length === 0 && !st.scheduled && st.inFlight === undefined && this.#keys.get(key) === st)
      this.#keys.delete(key)
  }
}
