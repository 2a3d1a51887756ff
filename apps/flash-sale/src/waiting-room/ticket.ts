import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Waiting-room tickets: `v1.<payload>.<mac>`, both base64url. The payload names the sale, the
 * room's generation (new at every sale reset), the user and the user's order key in the line;
 * the MAC is HMAC-SHA256 over the payload with a key derived from WAITING_ROOM_SECRET, cut to
 * 128 bits (RFC 2104 §5 allows it; 2^-128 per forgery attempt). It is checked in constant time
 * before any field is read, so a forged ticket tells nothing and names nothing.
 *
 * The ticket is a pure function of its claims: a user who joins again (another tab, a retry,
 * another instance) gets the very same string, and a ticket can be re-issued from Redis state.
 */
export interface TicketClaims {
  productId: string
  /** 16 hex digits: the room's generation; a sale reset makes every earlier ticket stale. */
  generation: string
  userId: string
  /** The user's place in the line (lottery rank or join time in µs), decimal. */
  orderKey: string
}

export type TicketCheck =
  | { ok: true; claims: TicketClaims }
  | { ok: false; reason: 'malformed' | 'signature' }

/** Far above a real ticket (≈ 90 characters, ≤ 300 with 64-character ids): refused unread. */
export const MAX_TICKET_LENGTH = 400
const MAC_BYTES = 16
const SHAPE = /^v1\.([A-Za-z0-9_-]{1,360})\.([A-Za-z0-9_-]{22})$/
const ID = '[A-Za-z0-9_-]{1,64}'
const PAYLOAD = new RegExp(`^(${ID})\\|([0-9a-f]{16})\\|(${ID})\\|(\\d{1,16})$`)

export class TicketSigner {
  readonly #key: Buffer

  constructor(secret: string) {
    if (secret.length < 32) throw new RangeError('the waiting-room secret needs at least 32 characters')
    // A key of its own, so the secret could serve other purposes without the MACs colliding.
    this.#key = createHmac('sha256', secret).update('kunci waiting-room ticket v1').digest()
  }

  #mac(payload: string | Buffer): Buffer {
    return createHmac('sha256', this.#key).update(payload).digest().subarray(0, MAC_BYTES)
  }

  sign(claims: TicketClaims): string {
    const payload = `${claims.productId}|${claims.generation}|${claims.userId}|${claims.orderKey}`
    if (!PAYLOAD.test(payload)) throw new RangeError(`not a ticket payload: ${payload}`)
    return `v1.${Buffer.from(payload).toString('base64url')}.${this.#mac(payload).toString('base64url')}`
  }

  /** Any input (header, path segment): never throws. */
  verify(ticket: unknown): TicketCheck {
    if (typeof ticket !== 'string' || ticket.length > MAX_TICKET_LENGTH)
      return { ok: false, reason: 'malformed' }
    const shape = SHAPE.exec(ticket)
    if (!shape) return { ok: false, reason: 'malformed' }
    const payloadBytes = Buffer.from(shape[1]!, 'base64url')
    const given = Buffer.from(shape[2]!, 'base64url')
    // Node's decoder ignores the spare bits of the last character: only the canonical spelling
    // of a ticket is accepted, so one ticket has one string.
    if (given.toString('base64url') !== shape[2] || payloadBytes.toString('base64url') !== shape[1]) {
      return { ok: false, reason: 'malformed' }
    }
    const expected = this.#mac(payloadBytes)
    // Equal lengths by the pattern (22 base64url characters = 16 bytes); checked all the same.
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      return { ok: false, reason: 'signature' }
    }
    const fields = PAYLOAD.exec(payloadBytes.toString('latin1'))
    // A valid MAC over something we never sign would mean a leaked key; refuse it anyway.
    if (!fields) return { ok: false, reason: 'malformed' }
    return {
      ok: true,
      claims: { productId: fields[1]!, generation: fields[2]!, userId: fields[3]!, orderKey: fields[4]! },
    }
  }
}
