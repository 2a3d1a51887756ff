import type { RedisClient } from '../redis/connect.js'
import { SALES_REGISTRY_KEY, saleKeys } from '../redis/keys.js'
import { TimeoutError, withTimeout } from '../runtime-timeout.js'
import type { StockView } from './stock-view.js'

/**
 * The Redis reads of a sale outside the checkout (the snapshots, the admin, the order routes, the
 * worker's sale list), each bounded by READ_DEADLINE_MS. SaleStore extends it with the scripts.
 */

/** Bound on every Redis read outside the checkout, so that no endpoint hangs during a failover. */
export const READ_DEADLINE_MS = 2_000

export class SaleReads {
  constructor(readonly client: RedisClient) {}

  /** The epoch and stock of each sale, one pipelined read per sale (the snapshots' per-second check). */
  async epochs(productIds: readonly string[]): Promise<Map<string, { epoch: number; remaining: number }>> {
    const out = new Map<string, { epoch: number; remaining: number }>()
    await Promise.all(
      productIds.map(async (id) => {
        const k = saleKeys(id)
        // One sale's master out of reach costs that sale's answer, not the others'.
        const r = await withTimeout(
          this.client.pipeline().hget(k.meta, 'epoch').get(k.stock).exec(),
          READ_DEADLINE_MS,
        ).catch(() => undefined)
        if (!r) return
        const [e, s] = r
        if (e?.[0] || s?.[0]) return
        out.set(id, { epoch: Number(e?.[1] ?? 0), remaining: Number(s?.[1] ?? 0) })
      }),
    )
    return out
  }

  async remaining(productId: string): Promise<number | undefined> {
    const v = await withTimeout(this.client.get(saleKeys(productId).stock), READ_DEADLINE_MS)
    return v === null ? undefined : Number(v)
  }

  /** Units left in Redis and order events dead-lettered, for the admin's view of the sale. */
  async stockView(productId: string): Promise<StockView> {
    const k = saleKeys(productId)
    const [remaining, deadLettered] = await withTimeout(
      Promise.all([this.client.get(k.stock), this.client.xlen(k.dead)]),
      READ_DEADLINE_MS,
    )
    return { remaining: remaining === null ? undefined : Number(remaining), deadLettered }
  }

  /**
   * `<status>|<user>|<round>[|<reserved_at ms>]` → its parts; undefined if Redis does not know the
   * order. (Statuses written before reservations carried their time have no reservedAtMs.)
   */
  async orderStatus(productId: string, orderId: string) {
    const v = await withTimeout(this.client.hget(saleKeys(productId).status, orderId), READ_DEADLINE_MS)
    if (v === null) return undefined
    const [status = '', userId = '', round = '0', at] = v.split('|')
    return { status, userId, round: Number(round), reservedAtMs: at ? Number(at) : undefined }
  }

  /**
   * A hold sale's pay_by for a reservation answered again (a replay): its reservation time in
   * the status hash + the sale's hold_seconds. Undefined for an instant sale, or when Redis no
   * longer knows the order's time.
   */
  async payBy(productId: string, orderId: string, withinMs = READ_DEADLINE_MS): Promise<number | undefined> {
    const k = saleKeys(productId)
    if (withinMs <= 0) throw new TimeoutError(0)
    const r = await withTimeout(
      this.client.pipeline().hmget(k.meta, 'payment', 'hold_seconds').hget(k.status, orderId).exec(),
      withinMs,
    )
    const [metaR, statusR] = r ?? []
    if (metaR?.[0] || statusR?.[0]) throw metaR?.[0] ?? statusR?.[0]
    const [payment, hold] = (metaR?.[1] ?? []) as (string | null)[]
    if (payment !== 'hold') return undefined
    const at = String(statusR?.[1] ?? '').split('|')[3]
    return at ? Number(at) + Number(hold ?? 0) * 1_000 : undefined
  }

  async saleIds(): Promise<string[]> {
    return (await withTimeout(this.client.smembers(SALES_REGISTRY_KEY), READ_DEADLINE_MS)).sort()
  }
}
