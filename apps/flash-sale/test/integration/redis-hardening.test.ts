import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis, type RedisOptions } from 'ioredis'
import { afterAll, describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/config.js'
import { countBy, crowd, runCheckouts } from '../support/checkouts.js'
import { eventually } from '../support/eventually.js'
import { violations, waitForSettled } from '../support/invariants.js'
import { useStack } from '../support/stack-fixture.js'

/** One connection to one node that fails fast (no reconnect loop), so a refusal cannot hang a test. */
function connect(port: number, opts: RedisOptions): Redis {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 3_000,
    // Its INFO would be refused for the anonymous client, and ioredis would drop the connection.
    enableReadyCheck: false,
    lazyConnect: true,
    ...opts,
  })
  c.on('error', () => {})
  return c
}

/** The reply, or the error the command failed with. */
async function settle(p: Promise<unknown>): Promise<unknown> {
  try {
    return await p
  } catch (err) {
    return err
  }
}

// Redis error replies start with their code (NOAUTH, WRONGPASS, NOPERM); the rest is Redis' wording.
const codeOf = (reply: unknown) => (reply instanceof Error ? reply.message.split(' ')[0] : reply)

// `flash-sale up --tls`: every Redis node (cluster and lock nodes) speaks TLS only with the default
// user off; service, worker, lock clients and the redis_exporters all connect over TLS.
describe('the local stack with TLS and the default user off', () => {
  const fx = useStack(
    { strategy: 'redlock', instances: 1, tls: true, observe: true, sale: { productId: '9931', stock: 5 } },
    { db: 'fs_tls' },
  )
  const nodes = () => [...fx.stack.cluster.nodes, ...fx.stack.lockNodes!.nodes]

  it('serves checkouts over TLS end to end: 200 for the stock, then 409 sold out, orders in SQL', async () => {
    expect(fx.stack.env.REDIS_TLS_CA_FILE).toBe(fx.stack.tls!.caFile)
    const outcomes = await runCheckouts({
      url: fx.stack.url,
      productId: 9931,
      calls: crowd(40, 40),
      concurrency: 8,
    })
    expect(countBy(outcomes, (o) => o.status)).toEqual({ 200: 5, 409: 35 })
    for (const o of outcomes.filter((x) => x.status === 409)) expect(o.body.error?.code).toBe('SOLD_OUT')
    const facts = await waitForSettled(fx.stack.databaseUrl, '9931', 5)
    expect(facts.confirmed).toHaveLength(5)
    expect(violations(outcomes, facts, 5)).toEqual([])
  })

  it('every node refuses plain TCP and answers TLS clients that trust the stack CA', async () => {
    const { ca } = fx.stack.tls!
    for (const node of nodes()) {
      const plain = connect(node.port, { ...fx.stack.redisAdmin })
      const secure = connect(node.port, { ...fx.stack.redisAdmin, tls: { ca } })
      try {
        expect(await settle(plain.connect().then(() => plain.ping()))).toBeInstanceOf(Error)
        expect(await secure.connect().then(() => secure.ping())).toBe('PONG')
      } finally {
        plain.disconnect()
        secure.disconnect()
      }
    }
  })

  it('the default user is off on every node: no credentials → NOAUTH, AUTH default → WRONGPASS', async () => {
    const { ca } = fx.stack.tls!
    for (const node of nodes()) {
      const anonymous = connect(node.port, { tls: { ca } })
      try {
        await anonymous.connect()
        expect(codeOf(await settle(anonymous.get('sale')))).toBe('NOAUTH')
        expect(codeOf(await settle(anonymous.auth('default', fx.stack.redisAdmin.password)))).toBe(
          'WRONGPASS',
        )
      } finally {
        anonymous.disconnect()
      }
    }
  })

  it('the app user may not run FLUSHALL, CONFIG SET, KEYS, ACL SETUSER, DEBUG, SHUTDOWN; it may read what kunci needs', async () => {
    const { ca } = fx.stack.tls!
    for (const node of [fx.stack.cluster.nodes[0]!, fx.stack.lockNodes!.nodes[0]!]) {
      const app = connect(node.port, {
        username: fx.stack.env.REDIS_USERNAME!,
        password: fx.stack.env.REDIS_PASSWORD!,
        tls: { ca },
      })
      try {
        await app.connect()
        for (const command of [
          ['FLUSHALL'],
          ['FLUSHDB'],
          ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
          ['KEYS', '*'],
          ['ACL', 'SETUSER', 'intruder', 'on', '>pw', '+@all'],
        ] as [string, ...string[]][]) {
          expect([command[0], codeOf(await settle(app.call(...command)))]).toEqual([command[0], 'NOPERM'])
        }
        // DEBUG is refused by `enable-debug-command no` before ACLs are consulted, and SHUTDOWN
        // must not be tried for real: ask the ACL itself, as the admin user.
        const admin = connect(node.port, { ...fx.stack.redisAdmin, tls: { ca } })
        try {
          await admin.connect()
          for (const command of [['DEBUG', 'SLEEP', '0'], ['SHUTDOWN'], ['MONITOR']]) {
            const verdict = await admin.call('ACL', 'DRYRUN', fx.stack.env.REDIS_USERNAME!, ...command)
            expect([command[0], verdict]).not.toEqual([command[0], 'OK'])
            expect(String(verdict)).toContain('no permissions')
          }
        } finally {
          admin.disconnect()
        }
        expect(await app.config('GET', 'bind')).toEqual(['bind', '127.0.0.1'])
        expect(await app.config('GET', 'protected-mode')).toEqual(['protected-mode', 'yes'])
        expect(await app.ping()).toBe('PONG')
      } finally {
        app.disconnect()
      }
    }
  })

  it('the exporters reach every node over TLS as the admin user (redis_up 1), Prometheus has them up', async () => {
    expect(fx.stack.exporterUrls).toHaveLength(11)
    for (const url of fx.stack.exporterUrls) {
      const page = await fetch(url).then((r) => r.text())
      expect([url, /^redis_up 1$/m.test(page)]).toEqual([url, true])
    }
    const targets = await eventually(
      async () => {
        const body = (await fetch(`${fx.stack.prometheusUrl}/api/v1/targets`).then((r) => r.json())) as {
          data: { activeTargets: { scrapeUrl: string; health: string }[] }
        }
        return body.data.activeTargets
      },
      (ts) => ts.length >= 13 && ts.every((t) => t.health === 'up'),
      { timeoutMs: 30_000, intervalMs: 500, what: 'every target up' },
    ).catch(() => [])
    const down = targets.length === 0 ? ['(not all up in 30 s)'] : targets.filter((t) => t.health !== 'up')
    expect(down).toEqual([])
  })
})

describe('REDIS_TLS configuration', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fs-tls-config-'))
  const caFile = join(dir, 'ca.crt')
  writeFileSync(caFile, '-----BEGIN CERTIFICATE-----\n(test)\n-----END CERTIFICATE-----\n')
  afterAll(() => rmSync(dir, { recursive: true, force: true }))
  const base = {
    REDIS_CLUSTER_NODES: '127.0.0.1:7000',
    DATABASE_URL: 'postgres://app@db:5432/sale',
    ADMIN_TOKEN: 'a-long-enough-admin-token',
  }
  const problemsOf = (env: Record<string, string>) => {
    try {
      loadConfig({ ...base, ...env })
      return []
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError)
      return (err as ConfigError).problems
    }
  }

  it('is off by default; REDIS_TLS_CA_FILE turns it on with that CA, REDIS_TLS=true with the system CAs', () => {
    expect(loadConfig(base).redisTls).toBeUndefined()
    expect(loadConfig({ ...base, REDIS_TLS_CA_FILE: caFile }).redisTls).toEqual({
      ca: expect.stringContaining('BEGIN CERTIFICATE'),
    })
    expect(loadConfig({ ...base, REDIS_TLS: 'true' }).redisTls).toEqual({})
    const url = { REDIS_CLUSTER_NODES: '', REDIS_URL: 'rediss://127.0.0.1:7000' }
    expect(loadConfig({ ...base, ...url }).redisTls).toEqual({})
  })

  it('lists every TLS problem with its variable', () => {
    const problems = problemsOf({
      REDIS_TLS: 'yes',
      REDIS_TLS_CA_FILE: join(dir, 'missing.crt'),
      REDIS_TLS_CERT_FILE: caFile,
    }).join('\n')
    for (const name of [
      'REDIS_TLS=yes',
      'REDIS_TLS_CA_FILE=',
      'REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE',
    ]) {
      expect(problems).toContain(name)
    }
    expect(problemsOf({ REDIS_TLS: 'false', REDIS_TLS_CA_FILE: caFile })).toHaveLength(1)
    const plainUrl = { REDIS_CLUSTER_NODES: '', REDIS_URL: 'redis://127.0.0.1:7000', REDIS_TLS: 'true' }
    expect(problemsOf(plainUrl)).toEqual([expect.stringContaining('use rediss://')])
  })
})
