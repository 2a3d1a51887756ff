import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pool } from 'undici'
import { postCheckout } from './retrying-crowd.js'

// The crowd of issue 20: the retrying crowd of issue 13 (every 429/503/timeout retried after
// 100–300 ms with the same Idempotency-Key) spread over several service URLs (one of them an
// instance that partitions cut off), following a sequence of sales sold one after the other, and
// with a share of buyers clicking again a little later with a new key (they must be told
// ALREADY_PURCHASED naming the order they hold, never a second reservation).

/** One HTTP attempt. */
export interface SaleRequest {
  userId: number
  productId: string
  key: string
  /** Index into the crowd's URLs. */
  url: number
  /** A buyer's later click with a new key, after a 200/202. */
  again: boolean
  /** Date.now() when sent. */
  sentAt: number
  ms: number
  /** The service's own time (Server-Timing); undefined without an answer. */
  serverMs: number | undefined
  /** HTTP status; 0 = no answer within the client's timeout (a hang). */
  status: number
  code: string | undefined
  orderId: string | undefined
  /** Without an answer: why (a timeout, a reset, a socket the other side closed). */
  message?: string
}

export interface SalesCrowdOptions {
  urls: readonly string[]
  /** Concurrent clients, each one user at a time; client i uses urls[i % urls.length]. */
  clients: number
  /** The sale a new user goes for. */
  current: () => string
  stop: AbortSignal
  /** @defaultValue [100, 300] */
  retryDelayMs?: [number, number]
  /** Share of buyers (200/202) who click again later with a new key. @defaultValue 0.1 */
  againShare?: number
  /** How much later: [min, max] ms. @defaultValue [300, 1500] */
  againAfterMs?: [number, number]
  /** No answer after this long is a hang (status 0), far above any deadline. @defaultValue 10000 */
  timeoutMs?: number
}

export interface SalesCrowdResult {
  requests: SaleRequest[]
  /** Users still retrying when the crowd stopped. */
  unanswered: number
}

const retried = (status: number) => status === 0 || status === 429 || status === 503

export async function runSalesCrowd(o: SalesCrowdOptions): Promise<SalesCrowdResult> {
  const [minDelay, maxDelay] = o.retryDelayMs ?? [100, 300]
  const [minAgain, maxAgain] = o.againAfterMs ?? [300, 1_500]
  const againShare = o.againShare ?? 0.1
  const timeoutMs = o.timeoutMs ?? 10_000
  const pools = o.urls.map((url) => new Pool(url, { connections: o.clients, pipelining: 1 }))
  const requests: SaleRequest[] = []
  const later: Promise<void>[] = []
  let nextUser = 1
  let unanswered = 0

  const attempt = async (
    r: Pick<SaleRequest, 'userId' | 'productId' | 'key' | 'url' | 'again'>,
  ): Promise<SaleRequest> => {
    const a = await postCheckout(pools[r.url]!, { ...r, timeoutMs })
    return { ...r, ...a }
  }

  /** One user's checkout with one key until a final answer (or the crowd stops). */
  const buy = async (base: Pick<SaleRequest, 'userId' | 'productId' | 'url' | 'again'>) => {
    const key = randomUUID()
    for (;;) {
      const r = await attempt({ ...base, key })
      requests.push(r)
      if (!retried(r.status)) return r
      if (o.stop.aborted) {
        unanswered++
        return undefined
      }
      await sleep(minDelay + Math.random() * (maxDelay - minDelay))
    }
  }

  const client = async (i: number) => {
    const url = i % o.urls.length
    while (!o.stop.aborted) {
      const userId = nextUser++
      const productId = o.current()
      const final = await buy({ userId, productId, url, again: false })
      if (final && (final.status === 200 || final.status === 202) && Math.random() < againShare) {
        later.push(
          sleep(minAgain + Math.random() * (maxAgain - minAgain)).then(async () => {
            await buy({ userId, productId, url, again: true })
          }),
        )
      }
    }
  }
  await Promise.all(Array.from({ length: o.clients }, (_, i) => client(i)))
  await Promise.all(later)
  await Promise.all(pools.map((p) => p.close()))
  return { requests, unanswered }
}
