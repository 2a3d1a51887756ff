import type { Cache } from 'kunci'
import type { Db } from '../db/database.js'
import { productRow } from '../sql/sales.js'

export interface Product {
  product_id: string
  name: string
  price_cents: number
}

/**
 * Product names and prices from SQL through kunci's Cache: one loader call per product per
 * refresh across every instance (stampede-proof), the stale value served for `graceMs` if SQL is
 * slow or down, and dropped everywhere when an admin changes the product.
 */
export class Catalog {
  constructor(
    readonly cache: Cache,
    readonly db: Db,
    readonly options: { ttlMs: number; graceMs: number } = { ttlMs: 30_000, graceMs: 300_000 },
  ) {}

  product(productId: string): Promise<Product | undefined> {
    return this.cache.getOrSet<Product | undefined>({
      key: `product:${productId}`,
      ttlMs: this.options.ttlMs,
      graceMs: this.options.graceMs,
      loader: async () => {
        const r = await productRow(this.db, productId)
        const row = r.rows[0]
        return row
          ? { product_id: productId, name: row.name, price_cents: Number(row.price_cents) }
          : undefined
      },
    })
  }

  async invalidate(productId: string): Promise<void> {
    await this.cache.delete(`product:${productId}`)
  }
}
