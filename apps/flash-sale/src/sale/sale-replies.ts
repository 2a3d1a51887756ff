import type { PaymentMode, ReturnReason } from '../domain/order-states.js'
import type { ReserveCode } from '../domain/refusals.js'
import { ServiceError } from '../errors.js'

/**
 * What the sale's scripts are given and answer (sale-store.ts runs them), and the errors of an
 * answer that makes no sense. Split from sale-store.ts to keep it to one concept: running them.
 */

/** A sale as the admin defines it (amounts in cents, times in ms since the epoch, 0 = none). */
export interface SaleDefinition {
  productId: string
  round: number
  stockTotal: number
  priceCents: number
  startsAtMs: number
  endsAtMs: number
  perUserLimit: number
  /** How orders are paid (domain/order-states.ts). @defaultValue 'instant' */
  payment?: PaymentMode
  /** hold: seconds a reserved order waits for its payment. */
  holdSeconds?: number
}

/** One order whose unit goes back to the sale (return-units.lua). */
export interface UnitReturn {
  orderId: string
  userId: string
  reason: ReturnReason
}

/** return-units.lua's answer: `returned` (now), `before` (by an earlier call), `stale` (another round). */
export interface UnitReturnReply {
  epoch: number
  stock: number
  outcomes: ('returned' | 'before' | 'stale')[]
}

/**
 * reserve.lua's answer for one checkout; ROOM_CHECK: not run, the waiting room must gate it first;
 * SALE_RESETTING: not run, a reset closed the round and has not opened the next (503, retry).
 */
export interface ReserveReply {
  code: ReserveCode | 'ROOM_CHECK' | 'SALE_RESETTING'
  orderId: string
  /** Units left after the batch this checkout was in. */
  remaining: number
  /** The sale's epoch when the batch ran (sale/sale-snapshots.ts). */
  epoch: number
  /** The waiting room's generation when the batch ran, '' without a room. */
  roomGen: string
  replayed: boolean
  /** With replica acknowledgements: whether a replica was shown to hold the reservation. */
  replicated: boolean
  /**
   * With replica acknowledgements, for ALREADY_PURCHASED: whether the buyer record it comes from
   * was shown durable (a replica holds it, or the master is alone: replica-acks.ts). A master cut
   * off from its replica may name an order that the next failover drops (issue 20). For a refusal
   * recorded under an Idempotency-Key (SOLD_OUT, SALE_ENDED): whether that record was shown
   * durable; one that was not is no final answer (issue 37 item 5).
   */
  durable?: boolean
  /** With replica acknowledgements: the node the reservation was sent to (ReplicaAcks.nodeOf). */
  servedBy?: string | undefined
  /**
   * Hold sales: when a fresh reservation must be paid by (Redis server time of the reservation +
   * hold_seconds, ms since the epoch); the worker writes the same pay_by in SQL. Undefined for
   * instant sales and for replays (SaleStore.payBy reads a replay's from its status).
   */
  payByMs?: number
  /** The sale holds its orders until paid (hold_seconds > 0): a replay's pay_by is read again. */
  hold?: boolean
}

export interface ReserveInput {
  productId: string
  userId: string
  orderId: string
  idempotencyKey: string | undefined
  /**
   * The waiting room this checkout was checked against: the generation of the room whose gate
   * admitted it, or '' when this instance knows of no room. reserve.lua answers ROOM_CHECK
   * (nothing done) if the sale's room is another.
   */
  roomGen: string
}

/** A refusal from an instance's snapshot, to be recorded under its Idempotency-Key (refuse.lua). */
export interface RefuseInput {
  productId: string
  epoch: number
  userId: string
  idempotencyKey: string
  code: 'SOLD_OUT' | 'ALREADY_PURCHASED' | 'SALE_ENDED'
  orderId: string
}

/**
 * The recorded answer (the key's earlier one when it had one), or STALE: go through reserve.lua.
 * A key whose earlier answer was RESERVED is replayed with its confirmation, as reserve.lua's
 * replay would be (a repeat must not look more durable than the original).
 */
/**
 * A final refusal recorded under the checkout's Idempotency-Key: answered only once the record is
 * shown durable. A master cut off from its replica refused 30 keys SOLD_OUT while the units it had
 * reserved were lost in the failover, and the promoted master sold to the same keys (issue 37).
 */
export function isRecordedRefusal(code: string, idempotencyKey: string | undefined): boolean {
  return idempotencyKey !== undefined && (code === 'SOLD_OUT' || code === 'SALE_ENDED')
}

export type RefuseReply =
  | { code: 'STALE' }
  | {
      code: ReserveCode
      orderId: string
      replayed: boolean
      replicated: boolean
      durable?: boolean
      servedBy?: string | undefined
    }

/** What an instance needs to answer a sold-out sale from memory (sale/sale-snapshots.ts). */
export interface SaleState {
  epoch: number
  remaining: number
  startsAtMs: number
  endsAtMs: number
  perUserLimit: number
  /** The waiting room's generation, '' without a room. */
  roomGen: string
  /** user → { count, last order }; undefined when there are more than the bound asked for. */
  buyers: Map<string, { count: number; lastOrderId: string }> | undefined
  /**
   * With replica acknowledgements: whether what was read was shown durable after the read (a
   * replica holds it, or the master is alone). A snapshot of a master cut off from its replica
   * would answer ALREADY_PURCHASED with orders a failover may drop (issue 20).
   */
  durable: boolean
}

export class UnexpectedScriptReplyError extends ServiceError {
  readonly code = 'E_UNEXPECTED_REPLY'
  constructor(script: string, reply: unknown) {
    super(`${script}.lua answered ${JSON.stringify(reply)}; this is a bug in the service`)
  }
}

/** A checkout that failed inside the batch's script (reserve.lua's ERROR): the others went on. */
export class ReservationScriptError extends ServiceError {
  readonly code = 'E_RESERVATION_SCRIPT'
  constructor(productId: string, detail: string) {
    super(`reserve.lua failed for one checkout of product ${productId}: ${detail}`)
  }
}
