import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { metricNamesUsed, PROMETHEUS_SYNTHETIC, seriesNamesIn } from '../../../../deploy/src/metric-names.js'
import { crowd, runCheckouts } from '../support/checkouts.js'
import { useStack } from '../support/stack-fixture.js'

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

  it('every metric name used by the dashboard and the alert rules is on a live /metrics page', async () => {
    // Traffic first: contention on the product lock, sales, refusals, a catalog read.
    await runCheckouts({ url: fx.stack.url, productId: 9921, calls: crowd(200, 120), concurrency: 32 })
    await fetch(`${fx.stack.url}/v1/products/9921`)
    await sleep(3_000) // the worker's gauges refresh every 2 s
    const pages = await Promise.all(
      [fx.stack.metricsUrl!, fx.stack.workerMetricsUrl, ...fx.stack.exporterUrls].map((u) =>
        fetch(u).then((r) => r.text()),
      ),
    )
    const live = new Set(pages.flatMap((p) => [...seriesNamesIn(p)]))
    const missing = metricNamesUsed().filter((n) => !live.has(n) && !PROMETHEUS_SYNTHETIC.includes(n))
    expect(missing).toEqual([])
  })
})
