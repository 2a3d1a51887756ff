import type { Durability } from '../config.js'
import { newOrderId } from '../domain/ids.js'
import { type Refusal, saleRefusal, unavailable } from '../domain/refusals.js'
import { isRedisOutage } from '../redis/redis-errors.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import type { LocalAnswer, SaleSnapshots } from '../sale/sale-snapshots.js'
import { isRecordedRefusal, type RefuseReply, type ReserveReply, type SaleStore } from '../sale/sale-store.js'
import type { StockView } from '../sale/stock-view.js'
import type { CheckoutOutcome, CheckoutRequest, CheckoutResult, CheckoutStrategy } from './strategy.js'
import { refused } from './strategy.js'

/** How long an ALREADY_PURCHASED may wait for its buyer record to be shown durable before 503. */
const UNCONFIRMED_PURCHASE_WAIT_MS = 800
/** SQL checks of a product Redis does not know, in flight at once per instance. */
const MAX_SALE_CHECKS = 4

/** A Redis timeout or outage as the checkout's 503 (retry in 1 s); anything else is a bug: thrown. */
function outageRefusal(err: unknown): Refusal {
  if (err instanceof TimeoutError) return unavailable('the sale store (Redis) did not answer in time', 1, err)
  if (isRedisOutage(err)) return unavailable('the sale store (Redis) is unreachable or failing over', 1, err)
  throw err
}

/**
 * The default: reserve.lua on the sale's slot does the whole reservation, for every checkout of
 * one event-loop turn in one call; the order goes to SQL through the sale's stream. With
 * durability `replica`, the store confirms a reservation on a replica (redis/replica-acks.ts):
 * 200 once a replica holds it, 202 pending if it did not confirm in time or the master has no
 * replica right now. Once the sale is sold out, its refusals come from memory
 * (sale/sale-snapshots.ts): reserve.lua's own answers, recorded under their Idempotency-Key.
 */
export class LuaStrategy implements CheckoutStrategy {
  readonly name = 'lua' as const
  /**
   * Without snapshots (LOCAL_ANSWERS=false): each sale's room generation as its last reply gave
   * it, so that the route skips the room's gate (a Redis call of its own) for a sale without a
   * room, as it does with snapshots. reserve.lua checks the room again (ROOM_CHECK), so a stale
   * entry costs one extra round trip, never a checkout past the room. Only sales that exist.
   */
  readonly #roomGens = new Map<string, string>()
  constructor(
    readonly store: SaleStore,
    readonly options: {
      durability: Durability
      snapshots?: SaleSnapshots
      /**
       * Does SQL hold this order with a unit? Asked only for an ALREADY_PURCHASED whose buyer
       * record could not be shown durable: an order SQL holds was durable when the worker took it.
       */
      holdsUnit?: (orderId: string) => Promise<boolean>
      /**
       * Does SQL know a sale of this product? Asked only when reserve.lua found no sale on the
       * node that answered: one question per product at a time, which every checkout of that
       * product waiting on it shares; at most MAX_SALE_CHECKS products at a time per instance (a
       * flood of made-up ids costs SQL no more than that); a yes remembered (sales are never
       * deleted).
       */
      saleInSql?: (productId: string) => Promise<boolean>
    },
  ) {}

  /** Sales SQL said it knows: an UNKNOWN_PRODUCT from Redis for one of these is a stale node's. */
  readonly #inSql = new Set<string>()
  /** The question to SQL in flight per product, shared by the checkouts that wait on it. */
  readonly #saleChecks = new Map<string, Promise<boolean>>()

  async checkout(req: CheckoutRequest): Promise<CheckoutOutcome> {
    // One deadline for the whole checkout (the store's, 2 s): every step after the reservation
    // (SQL's word on an order, a durability wait, a replay's pay_by) gets what is left of it, so
    // that a reservation answered late cannot be followed by a wait of its own (issue 20: 503s at
    // 3.2 s during a failover, the 2 s reservation then the 0.8 s wait).
    const deadline = performance.now() + this.store.deadlineMs
    try {
      const local = await this.#fromMemory(req, deadline)
      if (local !== undefined) return local
      // Bounded by the store's deadline (2 s): 503, and the user retries with the same
      // Idempotency-Key (or, without one, sees ALREADY_PURCHASED).
      const reservation = this.store.reserve({
        ...req,
        orderId: newOrderId(req.productId),
        roomGen: req.roomGen ?? '',
      })
      // After a refusal call that found its snapshot stale (a restock), only what is left.
      const left = deadline - performance.now()
      const reply = await (left < this.store.deadlineMs - 5
        ? withTimeout(reservation, Math.max(1, left))
        : reservation)
      if (reply.code === 'ALREADY_PURCHASED' && reply.durable === false)
        return await this.#unconfirmedPurchase(req, reply.orderId, reply.servedBy, deadline)
      if (
        isRecordedRefusal(reply.code, req.idempotencyKey) &&
        reply.durable === false &&
        !(await this.#keptWithin(req.productId, reply.servedBy, deadline))
      )
        return unkeptRefusal()
      if (reply.code === 'UNKNOWN_PRODUCT' && (await this.#saleKnownElsewhere(req.productId, deadline)))
        return refused(unavailable("the sale's Redis node does not know this sale yet (a failover)", 1))
      const outcome = this.#outcome(req, reply)
      // A replayed reservation of a hold sale: its pay_by is that of the first answer.
      // (An instant sale has no pay_by: no read, which during a failover could outlast the deadline.)
      if (outcome.ok === true && outcome.replayed && reply.hold)
        return await this.#withPayBy(req.productId, outcome, deadline)
      return outcome
    } catch (err) {
      return refused(outageRefusal(err))
    }
  }

  /**
   * The refusal this instance gives from memory alone, with no I/O, or undefined: a sold-out
   * sale's keyless checkout, or a repeat of a key whose refusal this instance saw recorded. The
   * HTTP layer's refusal lane (routes/refusal-lane.ts) answers these before fastify's routing.
   * A key not seen yet is undefined without asking the snapshot (and so without counting a local
   * answer): checkout() records it first.
   */
  answerFromMemory(req: CheckoutRequest): Refusal | undefined {
    const snapshots = this.options.snapshots
    const key = req.idempotencyKey
    if (snapshots === undefined) return undefined
    // A repeat of a key whose refusal this instance saw recorded: the same answer, no script.
    const known = key === undefined ? undefined : snapshots.keyAnswer(req.productId, key, req.userId)
    if (key !== undefined && known === undefined) return undefined
    const local = snapshots.answer(req.productId, req.userId)
    if (local === undefined) return undefined
    return known
      ? saleRefusal(known.code, req.productId, known.orderId)
      : saleRefusal(local.code, req.productId, local.orderId)
  }

  /** A sold-out sale's answer without a reservation, or undefined: go through reserve.lua. */
  async #fromMemory(req: CheckoutRequest, deadline: number): Promise<CheckoutOutcome | undefined> {
    const fromMemory = this.answerFromMemory(req)
    if (fromMemory !== undefined) return refused(fromMemory)
    // What is left for memory: a key not seen yet, whose refusal is recorded before it is sent.
    const snapshots = this.options.snapshots
    if (req.idempotencyKey === undefined || snapshots === undefined) return undefined
    const local = snapshots.answer(req.productId, req.userId)
    if (local === undefined) return undefined
    const recorded = await this.#record(req, local)
    if (recorded === undefined) return undefined
    if (recorded.code === 'RESERVED') {
      // The key's earlier answer was a reservation: its replay, confirmed like reserve.lua's.
      return this.#withPayBy(
        req.productId,
        {
          ok: true,
          orderId: recorded.orderId,
          status: this.options.durability === 'none' || recorded.replicated ? 'reserved' : 'pending',
          replayed: true,
        },
        deadline,
      )
    }
    if (recorded.code === 'ALREADY_PURCHASED' && recorded.durable === false)
      return this.#unconfirmedPurchase(req, recorded.orderId, recorded.servedBy, deadline)
    if (
      isRecordedRefusal(recorded.code, req.idempotencyKey) &&
      recorded.durable === false &&
      !(await this.#keptWithin(req.productId, recorded.servedBy, deadline))
    )
      return unkeptRefusal()
    this.#rememberKey(req, local.epoch, recorded.code, recorded.orderId)
    return refused(saleRefusal(recorded.code, req.productId, recorded.orderId))
  }

  /**
   * The snapshot's answer recorded under the checkout's key (refuse.lua), or what the key already
   * had; undefined if the snapshot was stale (it is dropped: the checkout goes to reserve.lua).
   */
  async #record(
    req: CheckoutRequest,
    local: LocalAnswer,
  ): Promise<Exclude<RefuseReply, { code: 'STALE' }> | undefined> {
    const recorded = await this.store.refuse({
      productId: req.productId,
      epoch: local.epoch,
      userId: req.userId,
      idempotencyKey: req.idempotencyKey!,
      code: local.code,
      orderId: local.orderId,
    })
    if (recorded.code !== 'STALE') return recorded
    this.options.snapshots?.invalidate(req.productId)
    return undefined
  }

  /**
   * A keyed checkout's refusal as a script recorded or replayed it (durable, for an
   * ALREADY_PURCHASED: the callers check), kept for the key's repeats (SaleSnapshots.keyAnswer).
   * IDEMPOTENCY_KEY_REUSED is not: it does not say whose key it is.
   */
  #rememberKey(req: CheckoutRequest, epoch: number, code: string, orderId: string): void {
    const key = req.idempotencyKey
    if (key === undefined || this.options.snapshots === undefined) return
    if (code !== 'SOLD_OUT' && code !== 'SALE_ENDED' && code !== 'ALREADY_PURCHASED') return
    this.options.snapshots.rememberKey(req.productId, epoch, key, { userId: req.userId, code, orderId })
  }

  /**
   * ALREADY_PURCHASED from a buyer record that could not be shown durable (the master may be cut
   * off from its replica and about to be deposed: the order it names may not survive, issue 20).
   * If SQL holds that order, it was durable when the worker took it: the answer stands. Otherwise
   * 503: the user retries in a second, when a replica holds it or the promoted master answers from
   * what it holds. Within the checkout's deadline.
   */
  async #unconfirmedPurchase(
    req: CheckoutRequest,
    orderId: string,
    servedBy: string | undefined,
    deadline: number,
  ): Promise<CheckoutOutcome> {
    const left = () => deadline - performance.now()
    // SQL holding the order makes the order durable, not the answer: under an Idempotency-Key the
    // answer is kept as the key's final one, and that record must be durable itself (a master
    // about to be deposed may lose it while the order survives, and the key then buys again).
    const inSql =
      req.idempotencyKey === undefined &&
      this.options.holdsUnit !== undefined &&
      left() > 0 &&
      (await withTimeout(this.options.holdsUnit(orderId), left()).catch(() => false))
    // Not in SQL yet: a replica that is resyncing after it rejoined holds it within about a second.
    // The same node only: the promoted replica being alone says nothing of the deposed master's record.
    if (inSql || (await this.#keptWithin(req.productId, servedBy, deadline)))
      return refused(saleRefusal('ALREADY_PURCHASED', req.productId, orderId))
    return refused(unavailable("the sale's Redis master cannot show yet that your earlier order is kept", 1))
  }

  /**
   * An answer recorded by a master whose confirmation round did not show at once that a replica
   * holds it (a final refusal under a key, or an ALREADY_PURCHASED). Usually the round only timed out (WAIT's 50 ms, a replica slow
   * to acknowledge on a loaded machine: 503s seconds after a failover had healed, issue 41); a
   * later round on the same node that is acknowledged covers everything the node wrote before
   * it, the record included. So: later rounds, as for an unconfirmed purchase, within the
   * checkout's deadline; false (503, retry) if none shows it, as when the master is cut off.
   */
  #keptWithin(productId: string, servedBy: string | undefined, deadline: number): Promise<boolean> {
    const left = deadline - performance.now()
    if (left <= 0) return Promise.resolve(false)
    return this.store.waitDurable(productId, Math.min(UNCONFIRMED_PURCHASE_WAIT_MS, left), servedBy)
  }

  /**
   * reserve.lua found no sale on the node that answered. Usually there is none: 404. But a master
   * cut off by a partition keeps answering for its slots until it sees it is in the minority (up
   * to about cluster-node-timeout after its replica was promoted), and a sale opened on the
   * promoted master meanwhile is unknown to it: an instance still routed there answered 404 for a
   * sale that was selling (issue 20, at a 15 s node timeout). If SQL knows the sale, the answer is
   * 503 instead and the user retries once the instance follows the promotion. Without an answer
   * from SQL in time (down, slow, or too many other products asked at once): 404 as before.
   * A burst of checkouts for the sale shares one question: when each asked on its own, beyond
   * MAX_SALE_CHECKS at once they were answered 404 without asking (16 of them in one partition run).
   */
  async #saleKnownElsewhere(productId: string, deadline: number): Promise<boolean> {
    if (this.#inSql.has(productId)) return true
    const ask = this.options.saleInSql
    const left = deadline - performance.now()
    if (ask === undefined || left <= 0) return false
    let check = this.#saleChecks.get(productId)
    if (check === undefined) {
      if (this.#saleChecks.size >= MAX_SALE_CHECKS) return false
      // Its own time bound (the whole store deadline): a waiter bounds its wait by what it has left.
      check = withTimeout(ask(productId), this.store.deadlineMs)
        .catch(() => false)
        .then((known) => {
          if (known) this.#inSql.add(productId)
          return known
        })
        .finally(() => this.#saleChecks.delete(productId))
      this.#saleChecks.set(productId, check)
    }
    return withTimeout(check, left).catch(() => false)
  }

  /** A replay answers the pay_by of the reservation it repeats (read from Redis: hold sales only). */
  async #withPayBy(
    productId: string,
    outcome: { ok: true } & CheckoutResult,
    deadline: number,
  ): Promise<CheckoutOutcome> {
    const payByMs = await this.store.payBy(productId, outcome.orderId, deadline - performance.now())
    return payByMs === undefined ? outcome : { ...outcome, payByMs }
  }

  #outcome(req: CheckoutRequest, reply: ReserveReply): CheckoutOutcome {
    // Only sales that exist are remembered: a flood of made-up product ids must not grow memory.
    if (reply.code !== 'UNKNOWN_PRODUCT') {
      if (this.options.snapshots)
        this.options.snapshots.observe(req.productId, reply.epoch, reply.remaining, reply.roomGen)
      else this.#roomGens.set(req.productId, reply.roomGen)
    }
    if (reply.code === 'ROOM_CHECK') return { ok: 'gate' }
    if (reply.code === 'SALE_RESETTING')
      return refused({
        code: 'UNAVAILABLE',
        message: `sale ${req.productId} is being reset (PUT /admin/sales under way): retry in a second`,
        retryAfterS: 1,
      })
    if (reply.code !== 'RESERVED') {
      // (An ALREADY_PURCHASED not shown durable never gets here: checkout() handles it first.)
      this.#rememberKey(req, reply.epoch, reply.code, reply.orderId)
      return refused(saleRefusal(reply.code, req.productId, reply.orderId))
    }
    return {
      ok: true,
      orderId: reply.orderId,
      status: this.options.durability === 'none' || reply.replicated ? 'reserved' : 'pending',
      remaining: reply.remaining,
      replayed: reply.replayed,
      ...(reply.payByMs !== undefined && { payByMs: reply.payByMs }),
    }
  }

  remaining(productId: string): Promise<number | undefined> {
    return this.store.remaining(productId)
  }

  stockView(productId: string): Promise<StockView> {
    return this.store.stockView(productId)
  }

  answering(idempotencyKey: string | undefined): boolean {
    return this.options.snapshots?.answering(idempotencyKey) === true
  }

  async recordRefusal(req: CheckoutRequest): Promise<Refusal | undefined> {
    const snapshots = this.options.snapshots
    if (req.idempotencyKey === undefined || snapshots === undefined) return undefined
    // Counted only if answered here: what goes on to checkout() is counted there, once.
    const local = snapshots.answer(req.productId, req.userId, Date.now(), false)
    if (local === undefined) return undefined
    let refusal: Refusal | undefined
    try {
      const recorded = await this.#record(req, local)
      if (recorded === undefined || recorded.code === 'RESERVED') return undefined
      if (recorded.code === 'ALREADY_PURCHASED' && recorded.durable === false) return undefined
      // A final refusal kept under the key, not shown durable: no final answer yet (503).
      if (
        isRecordedRefusal(recorded.code, req.idempotencyKey) &&
        recorded.durable === false &&
        !(await this.#keptWithin(req.productId, recorded.servedBy, performance.now() + this.store.deadlineMs))
      )
        refusal = unkeptRefusalOf()
      else {
        this.#rememberKey(req, local.epoch, recorded.code, recorded.orderId)
        refusal = saleRefusal(recorded.code, req.productId, recorded.orderId)
      }
    } catch (err) {
      // As checkout() answers them: within the store's deadline, not after a second attempt.
      refusal = outageRefusal(err)
    }
    snapshots.counted(local)
    return refusal
  }

  roomGen(productId: string): string | undefined {
    const snapshots = this.options.snapshots
    return snapshots ? snapshots.roomGen(productId) : this.#roomGens.get(productId)
  }

  async close(): Promise<void> {}
}

/**
 * A final refusal recorded under the key on a master that could not show a replica holds it: it
 * may be cut off and about to be deposed, and the promoted master may sell to the same key. No
 * final answer yet: 503, and the client retries with the same Idempotency-Key (issue 37 item 5).
 */
function unkeptRefusal(): CheckoutOutcome {
  return refused(unkeptRefusalOf())
}

function unkeptRefusalOf(): Refusal {
  return unavailable("the sale's Redis master cannot show yet that this answer is kept", 1)
}
