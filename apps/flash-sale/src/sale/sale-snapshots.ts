import type { SaleState, SaleStore } from './sale-store.js'

export interface SnapshotOptions {
  /**
   * The memory bound of a snapshot: a sold-out sale with more buyers than this is not answered
   * from memory (every checkout goes to Redis). A buyer costs about 100 bytes: 100,000 ≈ 10 MB.
   * @defaultValue 100000
   */
  maxBuyers?: number
  /**
   * Keys whose recorded refusal an instance keeps per sale and epoch, to answer their repeats
   * without a script call; beyond it, repeats go to Redis as before. About 150 bytes each.
   * @defaultValue 100000
   */
  maxKeys?: number
  /** Every known sale's epoch is read this often (a lost notification costs at most this). @defaultValue 1000 */
  checkIntervalMs?: number
  /**
   * The freshness bound of every answer from memory (issue 37 item 7): a sale whose epoch no read
   * of its master confirmed within this long is not answered from memory, so an instance cut off
   * from the sale's master answers as a checkout that reaches for Redis does (503), not "sold out"
   * from a snapshot of any age while the sale may have been restocked elsewhere. Confirmed by
   * each per-second epoch read, each batch reply and each notification. @defaultValue 3000
   */
  maxAgeMs?: number
  /**
   * Around the sale's start and end, checkouts go to Redis: its clock (TIME) decides, and this
   * instance's may be off by up to this much. @defaultValue 1000
   */
  clockMarginMs?: number
  /** A local answer was given (by code). */
  onLocalAnswer?: (code: LocalAnswer['code']) => void
  /** The per-second check found a newer epoch the notifications had not brought: one was lost. */
  onResync?: (productId: string) => void
  /** A sale's epoch as this instance knows it now. */
  onEpoch?: (productId: string, epoch: number) => void
}

/** What a snapshot answers: the refusals reserve.lua would give a sold-out sale. */
export interface LocalAnswer {
  code: 'SOLD_OUT' | 'ALREADY_PURCHASED' | 'SALE_ENDED'
  /** ALREADY_PURCHASED: the user's last order; '' otherwise. */
  orderId: string
  /** The epoch the answer holds for (refuse.lua records it only at that epoch). */
  epoch: number
}

/** A key's recorded refusal, as refuse.lua or reserve.lua answered it. */
interface KeyAnswer {
  userId: string
  code: LocalAnswer['code']
  orderId: string
}

interface Known {
  epoch: number
  /** Keys whose recorded answer at this epoch is a refusal this instance saw. */
  keys?: Map<string, KeyAnswer>
  /** The waiting room's generation at `epoch` ('' none), as the last batch or read saw it. */
  roomGen: string
  soldOut: boolean
  /** When a read of the sale's master last showed `epoch` current (Date.now()). */
  seenAt: number
  /** Loaded once the sale is sold out at `epoch`; undefined while loading or over the bound. */
  state: SaleState | undefined
  loading: boolean
  /** A load found the state not durable: the next load not before this (Date.now()). */
  retryAt?: number
}

/**
 * What this instance knows of each sale, to answer a sold-out sale's flood from memory (issue 15)
 * with exactly reserve.lua's answers, never a sale:
 *
 * - **Epoch.** Every change that can make a unit sellable again (a reset, a restock, a unit
 *   returned) raises the sale's epoch in the same script that changes the stock, and publishes it
 *   on the sale's sharded channel. A snapshot belongs to one epoch; a newer one voids it.
 * - **Sold out.** Learnt from the batch that sold the last unit (its reply) and from the
 *   'sold-out <epoch>' notification of the instance that sold it. The snapshot is then read from
 *   Redis: window, limit, room, and the buyers (at most the stock; over `maxBuyers`, no snapshot).
 *   Within an epoch a sold-out sale's buyers cannot change, so the snapshot stays exact.
 * - **Never oversell.** A local answer only ever says no; a sale always goes through Redis.
 * - **Not undersell for long.** A missed notification is caught by one read of every known sale's
 *   epoch per `checkIntervalMs`: selling resumes within about a second of a restock.
 * - **Idempotency.** An answer to a checkout with an Idempotency-Key is recorded (refuse.lua, one
 *   call per sale per turn, epoch-checked) before it is sent, and the key's earlier answer wins:
 *   the same key gets the same answer on every instance, after restarts and after a restock.
 * - **Repeated keys.** A key's recorded answer never changes within the sale's round, so once this
 *   instance has seen a key's refusal recorded (refuse.lua's reply, or reserve.lua's for a keyed
 *   checkout) it answers the key's repeats itself: the owner gets the recorded answer, anyone else
 *   IDEMPOTENCY_KEY_REUSED, as the scripts would. Kept per epoch (a reset is a new round with new
 *   keys and raises the epoch; so does a restock, after which repeats go to Redis again until the
 *   sale is sold out anew). A reservation's key is not kept: its replay carries a confirmation.
 */
export class SaleSnapshots {
  readonly #store: SaleStore
  readonly #o: Required<Omit<SnapshotOptions, 'onLocalAnswer' | 'onResync' | 'onEpoch'>> &
    Pick<SnapshotOptions, 'onLocalAnswer' | 'onResync' | 'onEpoch'>
  readonly #sales = new Map<string, Known>()
  #timer: NodeJS.Timeout | undefined
  #checking = false

  constructor(store: SaleStore, options: SnapshotOptions = {}) {
    this.#store = store
    this.#o = {
      maxBuyers: 100_000,
      maxKeys: 100_000,
      checkIntervalMs: 1_000,
      maxAgeMs: 3_000,
      clockMarginMs: 1_000,
      ...options,
    }
  }

  start(): void {
    if (this.#timer) return
    this.#timer = setInterval(() => void this.check(), this.#o.checkIntervalMs)
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** A reserve batch's reply: the epoch it ran at, what was left, the room's generation. */
  observe(productId: string, epoch: number, remaining: number, roomGen: string): void {
    const k = this.#at(productId, epoch)
    if (k === undefined) return
    k.seenAt = Date.now()
    k.roomGen = roomGen
    if (remaining <= 0 && !k.soldOut) this.#soldOut(productId, k)
  }

  /** A message of the sale's channel: 'sold-out <epoch>' or 'epoch <n>'. */
  notify(productId: string, message: string): void {
    const [kind, n] = message.split(' ')
    const epoch = Number(n)
    if (!Number.isSafeInteger(epoch)) return
    const k = this.#at(productId, epoch)
    if (k !== undefined) k.seenAt = Date.now()
    if (k !== undefined && kind === 'sold-out' && !k.soldOut) this.#soldOut(productId, k)
  }

  /** The room's generation this instance knows for the sale ('' none), undefined if unknown. */
  roomGen(productId: string): string | undefined {
    return this.#sales.get(productId)?.roomGen
  }

  /**
   * The answer reserve.lua would give this checkout, from memory, or undefined: go to Redis (not
   * sold out at this epoch, not loaded yet, over the bound, a sale with a waiting room (its gate
   * answers first), or near the sale's start or end). Its order follows reserve.lua's checks.
   * Counted as a local answer unless `count` is false (the caller counts it with counted() once
   * it is the answer given).
   */
  answer(productId: string, userId: string, now = Date.now(), count = true): LocalAnswer | undefined {
    const k = this.#sales.get(productId)
    const s = k?.state
    if (!k?.soldOut || s === undefined || s.buyers === undefined || s.roomGen !== '') return undefined
    if (!this.#fresh(k, now)) return undefined
    const margin = this.#o.clockMarginMs
    if (now < s.startsAtMs + margin) return undefined
    if (s.endsAtMs > 0 && now >= s.endsAtMs - margin) {
      if (now < s.endsAtMs + margin) return undefined
      return this.#give({ code: 'SALE_ENDED', orderId: '', epoch: k.epoch }, count)
    }
    const bought = s.buyers.get(userId)
    if (bought && bought.count >= s.perUserLimit)
      return this.#give({ code: 'ALREADY_PURCHASED', orderId: bought.lastOrderId, epoch: k.epoch }, count)
    return this.#give({ code: 'SOLD_OUT', orderId: '', epoch: k.epoch }, count)
  }

  /** Counts a local answer that answer() gave uncounted. */
  counted(answer: LocalAnswer): void {
    this.#o.onLocalAnswer?.(answer.code)
  }

  /**
   * The recorded refusal of a key this instance has seen at the sale's current epoch, or
   * undefined (go to Redis). Asked only after answer() gave an answer for the checkout, i.e. with
   * the sale sold out and its snapshot loaded at that epoch.
   */
  keyAnswer(
    productId: string,
    key: string,
    userId: string,
  ): { code: LocalAnswer['code'] | 'IDEMPOTENCY_KEY_REUSED'; orderId: string } | undefined {
    const a = this.#sales.get(productId)?.keys?.get(key)
    if (a === undefined) return undefined
    if (a.userId !== userId) return { code: 'IDEMPOTENCY_KEY_REUSED', orderId: '' }
    return { code: a.code, orderId: a.orderId }
  }

  /**
   * Could a checkout with this Idempotency-Key (undefined: none) be answered from memory, by the
   * look of its headers alone: is a sale sold out with its snapshot loaded (and, for a key, has
   * this instance seen the key's refusal recorded there)? The refusal lane reads a checkout's body
   * only if so: otherwise the checkout goes to the route as sent, at no cost of the lane's.
   */
  answering(key: string | undefined): boolean {
    for (const k of this.#sales.values())
      if (
        k.soldOut &&
        k.state !== undefined &&
        this.#fresh(k, Date.now()) &&
        (key === undefined || k.keys?.has(key) === true)
      )
        return true
    return false
  }

  /** A key's refusal as a script recorded (or replayed) it at `epoch`, kept while that epoch lasts. */
  rememberKey(productId: string, epoch: number, key: string, answer: KeyAnswer): void {
    const k = this.#sales.get(productId)
    if (k === undefined || k.epoch !== epoch) return
    k.keys ??= new Map()
    if (k.keys.size < this.#o.maxKeys || k.keys.has(key)) k.keys.set(key, answer)
  }

  /** A recorded answer came back STALE: the snapshot is void (a newer epoch, or stock again). */
  invalidate(productId: string): void {
    this.#sales.delete(productId)
  }

  /** One read per known sale: a newer epoch than ours means a notification was lost. */
  async check(): Promise<void> {
    if (this.#checking || this.#sales.size === 0) return
    this.#checking = true
    try {
      const ids = [...this.#sales.keys()]
      const now = await this.#store.epochs(ids).catch(() => new Map())
      for (const [id, { epoch, remaining }] of now) {
        const k = this.#sales.get(id)
        if (k === undefined) continue
        if (epoch > k.epoch) {
          this.#o.onResync?.(id)
          this.#sales.delete(id)
          this.#at(id, epoch)
        }
        const fresh = this.#sales.get(id)
        if (fresh) fresh.seenAt = Date.now()
        // Stock again within the same epoch cannot happen (it would have raised the epoch); if
        // it did, memory is not to be trusted.
        if (fresh?.soldOut && remaining > 0) this.#sales.delete(id)
        else if (fresh && !fresh.soldOut && remaining <= 0) this.#soldOut(id, fresh)
      }
    } finally {
      this.#checking = false
    }
  }

  /** Was the sale's epoch confirmed by its master within maxAgeMs? */
  #fresh(k: Known, now: number): boolean {
    return now - k.seenAt <= this.#o.maxAgeMs
  }

  #give(a: LocalAnswer, count = true): LocalAnswer {
    if (count) this.#o.onLocalAnswer?.(a.code)
    return a
  }

  /** The sale's entry at `epoch`: created or renewed for a newer epoch, undefined for an older one. */
  #at(productId: string, epoch: number): Known | undefined {
    const k = this.#sales.get(productId)
    if (k !== undefined && epoch < k.epoch) return undefined
    if (k !== undefined && epoch === k.epoch) return k
    const fresh: Known = {
      epoch,
      seenAt: Date.now(),
      roomGen: k?.roomGen ?? '',
      soldOut: false,
      state: undefined,
      loading: false,
    }
    this.#sales.set(productId, fresh)
    this.#o.onEpoch?.(productId, epoch)
    return fresh
  }

  #soldOut(productId: string, k: Known): void {
    k.soldOut = true
    if (k.loading || (k.retryAt !== undefined && Date.now() < k.retryAt)) return
    k.loading = true
    void this.#store.state(productId, this.#o.maxBuyers).then(
      (state) => {
        k.loading = false
        // Read after the epoch moved on, or not sold out at it after all: not a snapshot.
        if (this.#sales.get(productId) !== k || state === undefined) return
        if (state.epoch !== k.epoch || state.remaining > 0) {
          this.#sales.delete(productId)
          return
        }
        // Read on a master that could not show its buyers are durable (cut off from its replica):
        // not a snapshot to answer from. The next batch that sees the sale sold out reads again,
        // at most once a second.
        if (!state.durable) {
          k.retryAt = Date.now() + 1_000
          return
        }
        k.roomGen = state.roomGen
        k.state = state
      },
      () => {
        // Unreachable now: the next batch or check that sees it sold out tries again.
        k.loading = false
        k.soldOut = false
      },
    )
  }
}
