import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster } from 'ioredis'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { eventually } from '../support/eventually.js'
import { waitForSettled } from '../support/invariants.js'
import { useStack } from '../support/stack-fixture.js'

// SIGTERM is how Kubernetes stops a pod: the service must finish what it accepted, the worker must
// acknowledge what it read.
describe('SIGTERM drains', () => {
  const fx = useStack(
    {
      strategy: 'lua',
      instances: 1,
      lockNodes: false,
      env: { DRAIN_TIMEOUT_MS: '10000', DRAIN_DELAY_MS: '1500' },
      sale: { productId: '9921', stock: 100_000 },
    },
    { db: 'fs_drain' },
  )

  it('the service: readiness turns false, every request it received is answered, then it exits 0', async () => {
    const errors: string[] = []
    const statuses: number[] = []
    let user = 0
    let stop = false
    // A load balancer's view: it stops routing once /readyz fails.
    let routed = true
    const probe = (async () => {
      while (!stop && routed) {
        routed = await fetch(`${fx.stack.url}/readyz`).then(
          (r) => r.ok,
          () => false,
        )
        await sleep(20)
      }
    })()
    const lane = async () => {
      while (!stop && routed) {
        try {
          const res = await request(`${fx.stack.url}/v1/checkout`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', connection: 'close' },
            body: JSON.stringify({ product_id: 9921, user_id: ++user }),
          })
          statuses.push(res.statusCode)
          await res.body.dump()
        } catch (err) {
          const code = (err as { code?: string }).code ?? String(err)
          errors.push(code)
          if (code === 'ECONNREFUSED') return // the server is gone: this client stops too
        }
      }
    }
    const lanes = Array.from({ length: 16 }, lane)
    const exited = new Promise<number | null>((resolve) => {
      const t = setInterval(() => {
        if (!fx.stack.service.running) {
          clearInterval(t)
          resolve(0)
        }
      }, 20)
    })
    const state = () =>
      `${statuses.length} answers, errors ${JSON.stringify(errors.slice(-5))}, routed ${routed}, service running ${fx.stack.service.running} (exit ${fx.stack.service.exitCode}); its last output: ${fx.stack.service.output.slice(-5).join('').slice(-1500)}`
    const deadline = Date.now() + 20_000
    while (statuses.length < 300) {
      if (Date.now() > deadline) throw new Error(`not 300 answers within 20 s before the SIGTERM: ${state()}`)
      await sleep(10)
    }
    fx.stack.service.signal('SIGTERM')
    // DRAIN_DELAY_MS + DRAIN_TIMEOUT_MS, and the close's own bound, with room to spare.
    const giveUp = new AbortController()
    const late = await Promise.race([
      exited.then(() => false),
      sleep(40_000, undefined, { signal: giveUp.signal }).then(
        () => true,
        () => false,
      ),
    ])
    giveUp.abort()
    if (late) throw new Error(`the service did not exit within 40 s of SIGTERM: ${state()}`)
    stop = true
    await Promise.all([...lanes, probe])
    expect(statuses.length).toBeGreaterThan(300)
    // Every answer is a real one; nothing the server had accepted was cut off mid-request.
    expect(statuses.filter((s) => s !== 200)).toEqual([])
    expect(errors.filter((e) => e !== 'ECONNREFUSED')).toEqual([])
    const code = fx.stack.service.exitCode
    expect(code).toBe(0)
    fx.stack.service.start()
  })

  it('the worker: events it had read are persisted and acknowledged before it exits', async () => {
    // The service restarted at the end of the previous test: wait until it is ready again.
    await eventually(
      () => fetch(`${fx.stack.url}/readyz`).then((r) => r.ok),
      (ok) => ok,
      { timeoutMs: 30_000, what: 'the service back after its restart' },
    )
    await fx.stack.putSale({ productId: '9922', stock: 2_000 })
    {
      // Reserve 2,000 units quickly with the worker stopped, then let it start and SIGTERM it mid-way.
      await fx.stack.worker.stop()
      const calls = Array.from({ length: 2_000 }, (_, i) => i + 1)
      for (let i = 0; i < calls.length; i += 100) {
        await Promise.all(
          calls.slice(i, i + 100).map((u) =>
            request(`${fx.stack.url}/v1/checkout`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ product_id: 9922, user_id: u }),
            }).then((r) => r.body.dump()),
          ),
        )
      }
      fx.stack.worker.start()
      await waitForSettled(fx.stack.databaseUrl, '9922', 200, 60_000)
      const pid = fx.stack.worker.pid
      await fx.stack.worker.stop() // SIGTERM, then waits for the exit
      expect(fx.stack.worker.exitCode).toBe(0)
      // The stopped worker holds nothing: its consumer has no pending events left in the group.
      const cluster = new Cluster(
        fx.stack.env
          .REDIS_CLUSTER_NODES!.split(',')
          .map((hp) => ({ host: '127.0.0.1', port: Number(hp.split(':')[1]) })),
        { redisOptions: { username: fx.stack.env.REDIS_USERNAME, password: fx.stack.env.REDIS_PASSWORD } },
      )
      try {
        const summary = (await cluster.xpending('{sale:9922}:orders', 'order-workers')) as [
          number,
          string | null,
          string | null,
          [string, string][] | null,
        ]
        const mine = (summary[3] ?? []).filter(([consumer]) => consumer.endsWith(`-${pid}`))
        expect(mine).toEqual([])
      } finally {
        cluster.disconnect()
      }
      fx.stack.worker.start()
      const facts = await waitForSettled(fx.stack.databaseUrl, '9922', 2_000, 90_000)
      expect(facts.confirmed).toHaveLength(2_000)
      expect(facts.payments).toBe(2_000)
    }
  })
})
