/**
 * An order as the reservation wrote it to the sale's stream: what the worker reads back
 * (orders/order-event.ts parses it) and what the books persist (sql/order-batches.ts). Here, below
 * both, so that the two name one shape.
 */
export interface OrderEvent {
  orderId: string
  productId: string
  userId: string
  round: number
  unit: number
  priceCents: number
  reservedAtMs: number
}
