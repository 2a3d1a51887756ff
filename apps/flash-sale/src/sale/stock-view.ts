/**
 * What the admin view of a sale needs from the store the strategy sells from. It lives with the
 * sale, not with the strategies that produce it: the sale's store and admin read it, and the
 * sale sits below the strategies (apps/flash-sale/test/unit/layers.test.ts).
 */
export interface StockView {
  /** Units not yet reserved, where the strategy keeps them apart from SQL (Redis); else undefined. */
  remaining: number | undefined
  /** Order events that kept failing and were set aside (the stream's dead letters). */
  deadLettered: number
}
