/**
 * startObservability against a real redis-server and a real HTTP /metrics page: Prometheus
 * reports every target up, loads the alert rules, and stop() leaves no process behind.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServiceMetrics } from '@kunci/flash-sale'
import { type NodeSet, readDefined, startNodes } from '@kunci/topology'
import { Registry } from 'prom-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type Observability,
  ObservabilityError,
  startObservability,
} from '../../src/observe/local-observability.js'

let nodes: NodeSet
let server: Server
let target: string
let dir: string
let obs: Observability | undefined

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 45_000): Promise<T> =>
  readDefined(check, what, { timeoutMs, intervalMs: 200 })

beforeAll(async () => {
  nodes = await startNodes({ count: 1, proxy: false, password: 'observe-test-pw' })
  const registry = new Registry()
  createServiceMetrics(registry).checkouts.inc({ strategy: 'lua', outcome: 'reserved', status: '200' })
  server = createServer((req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404).end()
    void registry
      .metrics()
      .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
  })
  server.listen(0, '127.0.0.1')
  await new Promise((r) => server.once('listening', r))
  target = `127.0.0.1:${(server.address() as AddressInfo).port}`
  dir = mkdtempSync(join(tmpdir(), 'kunci-observe-'))
})

afterAll(async () => {
  await obs?.stop()
  server?.close()
  await nodes?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe('startObservability', () => {
  it('scrapes the service, the worker and redis_exporter: every target up, the alert rules loaded', async () => {
    const node = nodes.nodes[0]!
    obs = await startObservability({
      dir,
      serviceTargets: [target],
      workerTargets: [target],
      redis: [{ addr: `${node.host}:${node.port}`, password: 'observe-test-pw', job: 'redis-redlock' }],
    })
    expect(obs.exporterUrls).toHaveLength(1)
    const exporterPage = await (await fetch(obs.exporterUrls[0]!)).text()
    expect(exporterPage).toMatch(/^redis_up 1$/m) // the exporter authenticated

    type Target = { labels: { job: string }; health: string }
    const targets = await until('all targets up', async () => {
      const body = (await (await fetch(`${obs!.prometheusUrl}/api/v1/targets`)).json()) as {
        data: { activeTargets: Target[] }
      }
      const active = body.data.activeTargets
      return active.length === 3 && active.every((t) => t.health === 'up') ? active : undefined
    })
    expect(targets.map((t) => t.labels.job).sort()).toEqual([
      'flash-sale',
      'flash-sale-worker',
      'redis-redlock',
    ])

    const rules = (await (await fetch(`${obs.prometheusUrl}/api/v1/rules`)).json()) as {
      data: { groups: { name: string; rules: unknown[] }[] }
    }
    expect(rules.data.groups.map((g) => g.name).sort()).toEqual([
      'flash-sale',
      'flash-sale-waiting-room',
      'kunci-locks',
      'redis',
    ])

    const pids = obs.pids
    expect(pids).toHaveLength(2)
    expect(pids.every(alive)).toBe(true)
    await obs.stop()
    expect(pids.filter(alive)).toEqual([])
  })

  it('says which tool is missing instead of hanging (E_OBSERVE_TOOL_MISSING)', async () => {
    const path = process.env.PATH
    process.env.PATH = join(dir, 'no-tools-here') // spawn looks the binaries up in this PATH
    try {
      const err = await startObservability({
        dir: join(dir, 'missing'),
        serviceTargets: [],
        workerTargets: [],
        redis: [{ addr: '127.0.0.1:1' }],
        startTimeoutMs: 10_000,
      }).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(err).toBeInstanceOf(ObservabilityError)
      expect((err as ObservabilityError).code).toBe('E_OBSERVE_TOOL_MISSING')
    } finally {
      process.env.PATH = path
    }
  })
})
