import { type ChildProcess, spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { findFreePort, readDefined } from '@kunci/topology'
import { afterAll, describe, expect, it } from 'vitest'
import { metricNamesUsed, PROMETHEUS_SYNTHETIC, seriesNamesIn } from '../../../../deploy/src/metric-names.js'
import { crowd, runCheckouts } from '../support/checkouts.js'
import { serviceCliPath, useStack } from '../support/stack-fixture.js'

const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 40_000): Promise<T> =>
  readDefined(check, what, { timeoutMs, intervalMs: 200 })

const json = async (res: Response) => ({
  status: res.status,
  body: (await res.json()) as Record<string, unknown>,
})

// `flash-sale up --observe`: Prometheus and the exporters scrape the real local stack, and every
// metric the dashboard and the alerts read is really exported by it.
describe('the local stack under observation', () => {
  const fx = useStack(
    { strategy: 'redlock', instances: 2, observe: true, sale: { productId: '9921', stock: 20 } },
    { db: 'fs_observe' },
  )

  it('Prometheus scrapes every target of the stack (service, worker, 11 redis exporters): all up', async () => {
    const deadline = Date.now() + 60_000
    let targets: { labels: { job: string }; health: string }[] = []
    while (Date.now() < deadline) {
      const body = (await fetch(`${fx.stack.prometheusUrl}/api/v1/targets`).then((r) => r.json())) as {
        data: { activeTargets: typeof targets }
      }
      targets = body.data.activeTargets
      if (targets.length > 0 && targets.every((t) => t.health === 'up')) break
      await sleep(500)
    }
    const jobs = targets.map((t) => t.labels.job).sort()
    expect(jobs.filter((j) => j === 'redis-cluster')).toHaveLength(6)
    expect(jobs.filter((j) => j === 'redis-redlock')).toHaveLength(5)
    expect(targets.length).toBeGreaterThanOrEqual(13)
    expect(targets.filter((t) => t.health !== 'up')).toEqual([])
  })

  // A lua instance beside the redlock ones (the same Redis, SQL and WAITING_ROOM_SECRET): a redlock
  // sale cannot have a waiting room, and the room's series appear only once a room has answered.
  let lua: ChildProcess | undefined
  afterAll(async () => {
    if (!lua || lua.exitCode !== null || lua.signalCode !== null) return
    const exited = new Promise((r) => lua!.once('exit', r))
    lua.kill('SIGTERM')
    await exited
  })

  /** A sale with a room on the lua instance, and every path its metrics count. */
  async function exerciseWaitingRoom(): Promise<string> {
    const port = await findFreePort()
    const url = `http://127.0.0.1:${port}`
    lua = spawn(process.execPath, [serviceCliPath(), 'serve', '--instances', '1'], {
      env: {
        ...process.env,
        ...fx.stack.env,
        STRATEGY: 'lua',
        PORT: String(port),
        FLASH_SALE_EXIT_WITH_PARENT: '1',
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    })
    await until('the lua instance', async () => ((await fetch(`${url}/readyz`)).ok ? true : undefined))
    const admin = { authorization: `Bearer ${fx.stack.adminToken}`, 'content-type': 'application/json' }
    const put = await json(
      await fetch(`${url}/admin/sales/9960`, {
        method: 'PUT',
        headers: admin,
        body: JSON.stringify({
          stock: 3,
          price: 10,
          waiting_room: { admit_per_second: 50, max_admitted: 2, admission_seconds: 10 },
        }),
      }),
    )
    expect(put.status).toBe(200)
    // One after the other, so that users 1 and 2 are the front of the line.
    const joins: Awaited<ReturnType<typeof json>>[] = []
    for (const user_id of [1, 2, 3, 4, 5]) {
      joins.push(
        await json(
          await fetch(`${url}/v1/sales/9960/queue`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ user_id }),
          }),
        ),
      )
    }
    const tickets = joins.map((j) => j.body.ticket as string)
    const poll = async (i: number) => json(await fetch(`${url}/v1/queue/${tickets[i]}`))
    // A 503 says "retry" (the checkout's 2 s deadline passed on a loaded machine): a client retries
    // it, and so does this one, until another answer (seen in CI: 503 where 200 was expected).
    // One Idempotency-Key per checkout, kept on its retries: a reservation behind a 503 is replayed.
    let keys = 0
    const checkout = async (userId: number, ticket?: string) => {
      const key = `observe-${++keys}`
      const deadline = Date.now() + 30_000
      for (;;) {
        const res = await fetch(`${url}/v1/checkout`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'idempotency-key': key,
            ...(ticket ? { 'waiting-room-ticket': ticket } : {}),
          },
          body: JSON.stringify({ product_id: 9960, user_id: userId }),
        })
        if (res.status !== 503 || Date.now() > deadline) return res
        await res.body?.cancel()
        await sleep(200)
      }
    }
    // Two admitted (max_admitted 2): the first buys, the second lets its admission lapse.
    await until('two admissions', async () => {
      const states = await Promise.all([0, 1].map(async (i) => (await poll(i)).body.status))
      return states.every((x) => x === 'admitted') ? true : undefined
    })
    expect((await checkout(1, tickets[0])).status).toBe(200)
    expect((await checkout(9)).status).toBe(429) // WAITING_ROOM: no ticket
    expect((await checkout(5, tickets[4])).status).toBe(429) // NOT_ADMITTED
    expect((await checkout(5, `${tickets[4]}x`)).status).toBe(403) // INVALID_TICKET
    // admission_seconds 10: user 2's admission lapses, and the next poll counts it as dropped.
    await until(
      'a lapsed admission',
      async () => {
        await poll(4)
        const page = await (await fetch(`${url}/metrics`)).text()
        return /^flash_sale_waiting_room_dropped_total\{[^}]*reason="admission_expired"[^}]*\} [1-9]/m.test(
          page,
        )
          ? true
          : undefined
      },
      30_000,
    )
    return `${url}/metrics`
  }

  it('every metric name used by the dashboard and the alert rules is on a live /metrics page', async () => {
    // Traffic first: contention on the product lock, sales, refusals, a catalog read.
    await runCheckouts({ url: fx.stack.url, productId: 9921, calls: crowd(200, 120), concurrency: 32 })
    await fetch(`${fx.stack.url}/v1/products/9921`)
    const roomMetricsUrl = await exerciseWaitingRoom()
    // The worker's gauges refresh every 2 s, later on a loaded machine: read the pages until every
    // name is there (a fixed 3 s wait missed them beside a CPU-bound process), then say which are not.
    const missingNow = async () => {
      const pages = await Promise.all(
        [fx.stack.metricsUrl!, fx.stack.workerMetricsUrl, roomMetricsUrl, ...fx.stack.exporterUrls].map((u) =>
          fetch(u).then((r) => r.text()),
        ),
      )
      const live = new Set(pages.flatMap((p) => [...seriesNamesIn(p)]))
      return metricNamesUsed().filter((n) => !live.has(n) && !PROMETHEUS_SYNTHETIC.includes(n))
    }
    let missing: string[] = ['(no /metrics page could be read)']
    await until('every metric name on a live page', async () => {
      missing = await missingNow()
      return missing.length === 0 ? true : undefined
    }).catch(() => {})
    expect(missing).toEqual([])
  })
})
