import type { OrderEvent } from '../domain/order-event.js'
import { ServiceError } from '../errors.js'

/** An order as the reservation wrote it to the sale's stream (its shape lives in domain/), parsed back. */
export type { OrderEvent }

export class MalformedEventError extends ServiceError {
  readonly code = 'E_MALFORMED_EVENT'
  constructor(entryId: string, why: string) {
    super(`order event ${entryId}: ${why}`)
  }
}

/** Stream entry fields (flat [k, v, k, v…]) → event. Throws MalformedEventError. */
export function parseOrderEvent(productId: string, entryId: string, fields: string[]): OrderEvent {
  const f = new Map<string, string>()
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!)
  const num = (name: string) => {
    const n = Number(f.get(name))
    if (!Number.isSafeInteger(n) || n < 0) throw new MalformedEventError(entryId, `${name} is not an integer`)
    return n
  }
  const orderId = f.get('order_id')
  const userId = f.get('user_id')
  if (!orderId || !userId) throw new MalformedEventError(entryId, 'order_id or user_id missing')
  return {
    orderId,
    productId,
    userId,
    round: num('round'),
    unit: num('unit'),
    priceCents: num('price_cents'),
    reservedAtMs: num('reserved_at'),
  }
}
