import type { RedisClient } from '../redis/connect.js'
import { SALES_REGISTRY_KEY, saleKeys } from '../redis/keys.js'
import { withTimeout } from '../runtime-timeout.js'

export interface SlotWatchOptions {
  /** One probe of every known sale's slot this often. @defaultValue 1000 */
  intervalMs?: number
  /** A probe not answered within this is a failure. @defaultValue 1000 */
  probeTimeoutMs?: number
  /** After each probe, with unreachableSeconds() (for the gauge). */
  onProbed?: (unreachableSeconds: Map<string, number>) => void
}

interface SaleContact {
  ok: boolean
  lastOkAt: number
}

/**
 * Whether each sale's slot answers this instance: from every reservation's outcome (free), and
 * from one cheap read per sale per second plus one SMEMBERS of the sales registry (so an idle
 * instance knows too, and learns of sales created elsewhere). It drives readiness
 * (/readyz is false while a sale's slot is unreachable) and the gauge
 * `flash_sale_sale_store_unreachable_seconds`, the time since the slot last answered: the signal
 * that would have shown issue 13's outage, where every checkout of one sale ended in 503.
 */
export class SlotWatch {
  readonly #client: RedisClient
  readonly #o: Required<Omit<SlotWatchOptions, 'onProbed'>> & Pick<SlotWatchOptions, 'onProbed'>
  readonly #sales = new Map<string, SaleContact>()
  #timer: NodeJS.Timeout | undefined
  #probing = false

  constructor(client: RedisClient, options: SlotWatchOptions = {}) {
    this.#client = client
    this.#o = { intervalMs: 1_000, probeTimeoutMs: 1_000, ...options }
  }

  start(): void {
    if (this.#timer) return
    this.#timer = setInterval(() => void this.probe(), this.#o.intervalMs)
    this.#timer.unref()
    void this.probe()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /**
   * A reservation's outcome: answered by the slot, or failed with an outage. Only sales that
   * exist are watched (a request for an unknown product adds nothing).
   */
  record(productId: string, ok: boolean): void {
    const c = this.#sales.get(productId)
    if (c === undefined) {
      if (ok) this.#sales.set(productId, { ok, lastOkAt: Date.now() })
      return
    }
    c.ok = ok
    if (ok) c.lastOkAt = Date.now()
  }

  /** Probes every known sale's slot once now (and re-reads the registry every few probes). */
  async probe(): Promise<void> {
    if (this.#probing) return
    this.#probing = true
    try {
      const reach = async (id: string) => {
        const ok = await withTimeout(this.#client.exists(saleKeys(id).meta), this.#o.probeTimeoutMs).then(
          () => true,
          () => false,
        )
        this.record(id, ok)
      }
      // The known sales are probed while the registry (one SMEMBERS) is read, so a probe lasts
      // about probeTimeoutMs and a dead slot is seen within intervalMs + probeTimeoutMs.
      const known = [...this.#sales.keys()].map(reach)
      const ids = await withTimeout(this.#client.smembers(SALES_REGISTRY_KEY), this.#o.probeTimeoutMs).catch(
        () => [] as string[],
      )
      for (const id of ids) {
        if (this.#sales.has(id)) continue
        // Not reachable until shown to be.
        this.#sales.set(id, { ok: false, lastOkAt: Date.now() })
        known.push(reach(id))
      }
      await Promise.all(known)
      this.#o.onProbed?.(this.unreachableSeconds())
    } finally {
      this.#probing = false
    }
  }

  hasSales(): boolean {
    return this.#sales.size > 0
  }

  /** Every known sale's slot answered its last contact (true when no sale is known). */
  reachable(): boolean {
    for (const c of this.#sales.values()) if (!c.ok) return false
    return true
  }

  /** Per sale: seconds since its slot last answered, 0 while it answers. */
  unreachableSeconds(): Map<string, number> {
    const now = Date.now()
    const out = new Map<string, number>()
    for (const [id, c] of this.#sales) out.set(id, c.ok ? 0 : (now - c.lastOkAt) / 1_000)
    return out
  }
}
