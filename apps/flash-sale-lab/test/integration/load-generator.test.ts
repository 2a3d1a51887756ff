import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { loadCommand } from '../../src/cli/load.js'
import { percentile } from '../../src/load/latency.js'
import type { LoadResult } from '../../src/load/result.js'
import { runLoad } from '../../src/load/run-load.js'

/** What the tiny checkout saw: every request, in arrival order, with the delay it applied. */
interface Seen {
  userId: number
  key: string | undefined
  arrivedMs: number
  answeredMs: number
  status: number
  delayMs: number
}

interface TestServer {
  url: string
  seen: Seen[]
  orders: Map<string, number>
  /** Requests received so far, answered or not. */
  arrived(): number
  app: FastifyInstance
}

/**
 * A flash sale in miniature: `stock` units, one per user; the same Idempotency-Key replays its
 * first answer; requests for which `busy(userId, arrival)` holds (arrival: 1 for the first request
 * the server received) get 429 BUSY, replayed for their key; each answer is delayed
 * by `delay(userId)` ms so that latency percentiles are known on the server side.
 */
async function startServer(opts: {
  stock: number
  delay: (userId: number) => number
  busy?: (userId: number, arrival: number) => boolean
}): Promise<TestServer> {
  const app = Fastify({ logger: false })
  const seen: Seen[] = []
  const orders = new Map<string, number>()
  const buyers = new Set<number>()
  const byKey = new Map<string, Promise<{ status: number; body: unknown }>>()
  let stock = opts.stock
  let nextOrder = 1
  const t0 = performance.now()
  let arrived = 0
  const decide = (userId: number, arrival: number): { status: number; body: unknown } => {
    if (opts.busy?.(userId, arrival))
      return { status: 429, body: { error: { code: 'BUSY', message: 'busy' } } }
    if (buyers.has(userId))
      return { status: 409, body: { error: { code: 'ALREADY_PURCHASED', message: 'x' } } }
    if (stock <= 0) return { status: 409, body: { error: { code: 'SOLD_OUT', message: 'x' } } }
    stock--
    buyers.add(userId)
    const orderId = `ord-${nextOrder++}`
    orders.set(orderId, userId)
    return { status: 200, body: { order_id: orderId, status: 'pending', product_id: 9921, user_id: userId } }
  }
  app.post('/v1/checkout', async (req, reply) => {
    const arrivedMs = performance.now() - t0
    const arrival = ++arrived
    const { user_id: userId } = req.body as { product_id: number; user_id: number }
    const key = req.headers['idempotency-key'] as string | undefined
    const delayMs = opts.delay(userId)
    let answer: Promise<{ status: number; body: unknown }>
    const existing = key === undefined ? undefined : byKey.get(key)
    if (existing) answer = existing
    else {
      answer = sleep(delayMs).then(() => decide(userId, arrival))
      if (key !== undefined) byKey.set(key, answer)
    }
    const { status, body } = await answer
    if (existing) await sleep(delayMs)
    seen.push({ userId, key, arrivedMs, answeredMs: performance.now() - t0, status, delayMs })
    return reply.code(status).send(body)
  })
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  return { url: address, seen, orders, arrived: () => arrived, app }
}

const countBy = <T>(items: T[], key: (t: T) => string) => {
  const out: Record<string, number> = {}
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1
  return out
}
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)

describe('runLoad against a tiny fastify checkout', () => {
  let server: TestServer | undefined
  afterEach(async () => {
    await server?.app.close()
    server = undefined
  })

  it('counts, orders and percentiles match what the server saw; series add up to the totals', async () => {
    // The first request is refused BUSY whoever sends it (and its purchase retried, repeatRatio 1):
    // how many random users of the busy kind a run of 3 s meets depends on the machine's speed.
    server = await startServer({
      stock: 40,
      delay: (u) => (u % 5) * 10,
      busy: (u, arrival) => arrival === 1 || u % 11 === 0,
    })
    const result = await runLoad({
      url: server.url,
      stages: [
        { durationMs: 1_000, target: 8 },
        { durationMs: 2_000, target: 8 },
      ],
      userIdMin: 1,
      userIdMax: 200,
      thinkTimeMs: 20,
      repeatRatio: 1,
      maxRetries: 2,
      doubleClickRatio: 0.2,
    })
    const seen = server.seen
    expect(result.version).toBe(1)
    expect(result.stopReason).toBe('completed')
    expect(result.totals.requests).toBe(seen.length)
    expect(result.totals.answered).toBe(seen.length)
    expect(result.totals.transportErrors).toEqual({})
    expect(result.totals.byStatus).toEqual(countBy(seen, (s) => String(s.status)))
    expect(result.totals.byStatus['429']).toBeGreaterThan(0)
    expect(result.totals.byErrorCode.BUSY).toBe(result.totals.byStatus['429'])
    expect(result.totals.retries).toBeGreaterThan(0)
    // Double clicks are a random 20% of a number of purchases that the machine's speed sets:
    // counted, and checked against what the server saw rather than expected to happen (the double
    // click test below forces them). Each purchase has its own key: one request, one more if
    // double-clicked, one per retry.
    const perKey = countBy(seen, (x) => x.key ?? '')
    expect(Object.keys(perKey)).toHaveLength(result.totals.purchases)
    expect(sum(Object.values(perKey).map((n) => n - 1))).toBe(
      result.totals.doubleClicks + result.totals.retries,
    )
    expect(result.totals.requests).toBe(
      result.totals.purchases + result.totals.doubleClicks + result.totals.retries,
    )
    console.info(
      `load: ${result.totals.purchases} purchases, ${result.totals.doubleClicks} double clicks, ${result.totals.retries} retries`,
    )

    // Every order the client kept is one the server issued, to the same user; 200s = orders.
    expect(result.orders).toHaveLength(result.totals.byStatus['200'] ?? 0)
    for (const o of result.orders) expect(server.orders.get(o.order_id)).toBe(o.user_id)
    expect(new Set(result.orders.map((o) => o.order_id))).toEqual(new Set(server.orders.keys()))

    // Time series add up to the totals, one column per status, each as long as t.
    const s = result.series
    expect(sum(s.requests)).toBe(result.totals.answered)
    for (const [status, column] of Object.entries(s.byStatus)) {
      expect(column).toHaveLength(s.t.length)
      expect(sum(column)).toBe(result.totals.byStatus[status])
    }
    expect(JSON.parse(JSON.stringify(result))).toEqual(result)

    // The client's latency is the server's delay plus transport: never less, not much more.
    const delays = Float64Array.from(seen.map((x) => x.delayMs)).sort()
    const slack = 250 // a loaded 2-core machine
    for (const [p, got] of [
      [50, result.latency.p50Ms],
      [99, result.latency.p99Ms],
    ] as const) {
      expect(got).toBeGreaterThanOrEqual(percentile(delays, p) - 1)
      expect(got).toBeLessThan(percentile(delays, p) + slack)
    }
    expect(result.latency.maxMs).toBeGreaterThanOrEqual(40 - 1)
    expect(result.latency.count).toBe(seen.length)
  }, 30_000)

  it('ramps VUs along the stages, within a tolerance', async () => {
    server = await startServer({ stock: 1_000_000, delay: () => 5 })
    const seconds: { t: number; vus: number }[] = []
    const result = await runLoad(
      {
        url: server.url,
        stages: [
          { durationMs: 2_000, target: 20 },
          { durationMs: 1_000, target: 20 },
          { durationMs: 2_000, target: 0 },
        ],
        thinkTimeMs: 20,
        repeatRatio: 0,
        doubleClickRatio: 0,
        userIdMax: 1_000_000,
      },
      { onSecond: (x) => seconds.push({ t: x.t, vus: x.vus }) },
    )
    expect(result.stopReason).toBe('completed')
    const vus = result.series.vus
    // Ends of seconds 1..5: 10, 20, 20, 10, 0 targets; a VU above target finishes its purchase.
    expect(vus[0]).toBeGreaterThanOrEqual(7)
    expect(vus[0]).toBeLessThanOrEqual(12)
    expect(vus[1]).toBeGreaterThanOrEqual(18)
    expect(vus[2]).toBe(20)
    expect(vus[3]).toBeGreaterThanOrEqual(8)
    expect(vus[3]).toBeLessThanOrEqual(13)
    expect(result.durationMs).toBeGreaterThanOrEqual(4_900)
    expect(result.durationMs).toBeLessThan(7_000)
    expect(seconds.slice(0, 4).map((x) => x.t)).toEqual([1, 2, 3, 4])
    // The server saw more traffic while 20 VUs ran than in the first ramp second.
    const inWindow = (from: number, to: number) =>
      server!.seen.filter((x) => x.arrivedMs >= from && x.arrivedMs < to).length
    expect(inWindow(2_000, 3_000)).toBeGreaterThan(inWindow(0, 1_000))
  }, 30_000)

  it('sends a double click as two concurrent requests with one Idempotency-Key', async () => {
    server = await startServer({ stock: 1_000_000, delay: () => 100 })
    const result = await runLoad({
      url: server.url,
      stages: [{ durationMs: 1_000, target: 3 }],
      doubleClickRatio: 1,
      repeatRatio: 0,
      thinkTimeMs: 10,
      userIdMax: 1_000_000,
    })
    const byKey = new Map<string, Seen[]>()
    for (const s of server.seen) byKey.set(s.key!, [...(byKey.get(s.key!) ?? []), s])
    expect(byKey.size).toBe(result.totals.purchases)
    expect(result.totals.doubleClicks).toBe(result.totals.purchases)
    for (const [key, pair] of byKey) {
      expect(key).toMatch(/^[0-9a-f-]{36}$/)
      expect(pair).toHaveLength(2)
      expect(pair[0]!.userId).toBe(pair[1]!.userId)
      // At once: the second arrived before the first was answered.
      const [a, b] = pair.sort((x, y) => x.arrivedMs - y.arrivedMs)
      expect(b!.arrivedMs).toBeLessThan(a!.answeredMs)
    }
    // Both halves of a double click got the same order: one order per purchase.
    expect(new Set(result.orders.map((o) => o.order_id)).size).toBe(result.totals.purchases)
  }, 30_000)

  it('sends no key when idempotency keys are off', async () => {
    server = await startServer({ stock: 10, delay: () => 1 })
    await runLoad({ url: server.url, stages: [{ durationMs: 500, target: 2 }], idempotencyKeys: false })
    expect(server.seen.length).toBeGreaterThan(0)
    expect(server.seen.every((s) => s.key === undefined)).toBe(true)
  }, 30_000)

  it('stops at the duration cap, and at once on abort', async () => {
    server = await startServer({ stock: 1_000_000, delay: () => 5 })
    const capped = await runLoad({
      url: server.url,
      stages: [
        { durationMs: 0, target: 5 },
        { durationMs: 60_000, target: 5 },
      ],
      maxDurationMs: 1_500,
      userIdMax: 1_000_000,
    })
    expect(capped.stopReason).toBe('cap')
    expect(capped.durationMs).toBeGreaterThanOrEqual(1_500)
    expect(capped.durationMs).toBeLessThan(3_000)
    expect(capped.totals.answered).toBeGreaterThan(0)
    expect(capped.totals.answered).toBe(server.seen.length)

    const slow = await startServer({ stock: 10, delay: () => 30_000 })
    try {
      const controller = new AbortController()
      const stages = [
        { durationMs: 0, target: 3 },
        { durationMs: 60_000, target: 3 },
      ]
      const run = runLoad({ url: slow.url, stages, doubleClickRatio: 0 }, { signal: controller.signal })
      const deadline = Date.now() + 10_000
      while (slow.arrived() < 3 && Date.now() < deadline) await sleep(20)
      expect(slow.arrived()).toBe(3)
      controller.abort()
      const aborted = await run
      expect(aborted.stopReason).toBe('aborted')
      expect(aborted.durationMs).toBeLessThan(10_000)
      expect(aborted.totals.transportErrors.aborted).toBe(3)
      expect(aborted.totals.answered).toBe(0)
    } finally {
      await slow.app.close()
    }
  }, 30_000)

  it('counts refused connections as transport errors', async () => {
    server = await startServer({ stock: 1, delay: () => 0 })
    const url = server.url
    await server.app.close()
    server = undefined
    const result = await runLoad({ url, stages: [{ durationMs: 300, target: 2 }], thinkTimeMs: 50 })
    expect(result.totals.answered).toBe(0)
    expect(result.totals.transportErrors.refused).toBe(result.totals.requests)
    expect(result.transportErrorSamples.length).toBeGreaterThan(0)
  }, 30_000)
})

describe('flash-sale-lab load (CLI)', () => {
  it('runs, writes --json and prints a summary; bad options exit 2', async () => {
    const server = await startServer({ stock: 5, delay: () => 2 })
    const dir = mkdtempSync(join(tmpdir(), 'load-cli-'))
    try {
      const file = join(dir, 'out.json')
      const code = await loadCommand.run([
        '--url',
        server.url,
        '--stages',
        '500ms:2',
        '--quiet',
        '--json',
        file,
      ])
      expect(code).toBe(0)
      const result = JSON.parse(readFileSync(file, 'utf8')) as LoadResult
      expect(result.version).toBe(1)
      expect(result.totals.answered).toBe(server.seen.length)
      expect(await loadCommand.run(['--stages', 'forever'])).toBe(2)
      expect(await loadCommand.run(['--help'])).toBe(0)
      expect(loadCommand.name).toBe('load')
    } finally {
      await server.app.close()
      rmSync(dir, { recursive: true, force: true })
    }
  }, 30_000)
})
