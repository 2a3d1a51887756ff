/**
 * Issue 42: a sale's master with no replica to resync from, killed with -9 and restarted from
 * its AOF alone, keeps everything the checkout's scripts wrote (preload.lua: the sale, its stock,
 * the orders stream and its consumer group; reserve.lua: stock, buyers, idempotency answers,
 * order statuses, the stream's events), and the checkout sells on from there without drift.
 *
 * The node runs as the local stack and the manifests run it: AOF (`appendfsync always`, so every
 * acknowledged write is on disk before the kill), the `default` user off with the permissions the
 * AOF's replay of MULTI … EXEC checks (topology's adminUser), the service logged in as its own
 * ACL user (APP_ACL_RULES). With `user default off` alone, the same restart keeps only the plain
 * commands: the sale comes back without its stock, buyers and orders (Redis 7.0.15 here).
 */
import { type NodeSet, type RedisNode, readKeyspace, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterEach, describe, expect, it } from 'vitest'
import { type App, buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { connectDb } from '../../src/db/database.js'
import { migrate } from '../../src/db/migrate.js'
import { aclUserArgs } from '../../src/redis/acl.js'
import { saleKeys, WORKER_GROUP } from '../../src/redis/keys.js'
import { createRuntime, type Runtime } from '../../src/runtime.js'
import { createTestDatabase } from '../support/pg.js'

const TOKEN = 'test-admin-token-aof-restart'
const APP_USER = 'flash-sale'
const APP_PASSWORD = 'app-pw-aof-restart'
const PRODUCT = '7001'
const STOCK = 10

interface Fixture {
  node: RedisNode
  app: App
  admin: Redis
}

const cleanups: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {})
})

/** One sale node as the stack runs it, and the service on it in this process (no worker). */
async function start(defaultUserRules?: string): Promise<Fixture> {
  const set: NodeSet = await startNodes({
    count: 1,
    proxy: false,
    aof: 'always',
    adminUser: defaultUserRules === undefined ? true : { defaultUserRules },
    extraArgs: ['--user', ...aclUserArgs(APP_USER, APP_PASSWORD)],
  })
  cleanups.push(() => set.stop())
  const node = set.nodes[0]!
  const db = await createTestDatabase('fs_aof')
  cleanups.push(() => db.drop())
  const pool = connectDb(db.url, 1)
  await migrate(pool).finally(() => pool.end())
  const runtime: Runtime = await createRuntime(
    loadConfig({
      REDIS_URL: `redis://${node.host}:${node.port}`,
      REDIS_USERNAME: APP_USER,
      REDIS_PASSWORD: APP_PASSWORD,
      DATABASE_URL: db.url,
      ADMIN_TOKEN: TOKEN,
      DURABILITY: 'none',
    }),
  )
  cleanups.push(() => runtime.close())
  const app = await buildApp(runtime.deps)
  cleanups.push(() => app.close())
  const admin = new Redis({
    host: node.host,
    port: node.port,
    username: node.username!,
    password: node.password!,
  })
  admin.on('error', () => {})
  cleanups.push(async () => admin.disconnect())
  return { node, app, admin }
}

async function putSale(app: App): Promise<void> {
  const res = await app.inject({
    method: 'PUT',
    url: `/admin/sales/${PRODUCT}`,
    headers: { authorization: `Bearer ${TOKEN}` },
    payload: { stock: STOCK, price: 10 },
  })
  expect(res.statusCode).toBe(200)
}

async function checkout(app: App, userId: number, idempotencyKey?: string) {
  const res = await app.inject({
    method: 'POST',
    url: '/v1/checkout',
    headers: {
      'content-type': 'application/json',
      ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    },
    payload: JSON.stringify({ product_id: PRODUCT, user_id: userId }),
  })
  const body = res.json() as { order_id?: string; error?: { code: string } }
  return { status: res.statusCode, orderId: body.order_id, code: body.error?.code }
}

/** The sale loaded by the service's scripts: 6 of 10 units sold, 2 stream events read by a worker. */
async function sellSix(fx: Fixture): Promise<Map<number, string>> {
  await putSale(fx.app)
  const orders = new Map<number, string>()
  for (let user = 1; user <= 6; user++) {
    const r = await checkout(fx.app, user, `key-${user}`)
    expect(r.status).toBe(200)
    orders.set(user, r.orderId!)
  }
  // A worker of the group has read two events and not yet acknowledged them (pending entries).
  await fx.admin.xreadgroup(
    'GROUP',
    WORKER_GROUP,
    'worker-a',
    'COUNT',
    2,
    'STREAMS',
    saleKeys(PRODUCT).orders,
    '>',
  )
  return orders
}

describe("a sale's master restarted from its AOF alone (kill -9, no replica)", () => {
  it('keeps every key the sale scripts wrote, and sells on without drift', async () => {
    const fx = await start()
    const orders = await sellSix(fx)
    const keys = saleKeys(PRODUCT)
    const before = await readKeyspace(fx.node)
    for (const key of [keys.meta, keys.stock, keys.buyers, keys.idem, keys.status, keys.orders]) {
      expect(before[key], key).toBeDefined()
    }
    expect(before[keys.stock]!.value).toBe(String(STOCK - 6))
    expect(before[keys.orders]!.groups).toMatchObject([{ info: { name: WORKER_GROUP, pending: 2 } }])

    await fx.node.kill()
    await fx.node.restart()
    expect(await readKeyspace(fx.node)).toEqual(before)

    // The service's client reconnects by itself. A repeated request gets its stored answer, a
    // buyer without a key is refused, and exactly the 4 units left are sold to new users.
    // A 503 while it reconnects is a correct answer; a client retries with the same key.
    let replay = await checkout(fx.app, 1, 'key-1')
    const deadline = Date.now() + 30_000
    while (replay.status === 503 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100))
      replay = await checkout(fx.app, 1, 'key-1')
    }
    expect(replay).toMatchObject({ status: 200, orderId: orders.get(1) })
    expect(await checkout(fx.app, 2)).toMatchObject({ status: 409, code: 'ALREADY_PURCHASED' })
    const late = []
    for (let user = 100; user < 110; user++) late.push(await checkout(fx.app, user))
    expect(late.filter((r) => r.status === 200)).toHaveLength(STOCK - 6)
    expect(late.filter((r) => r.status === 409).map((r) => r.code)).toEqual(Array(6).fill('SOLD_OUT'))

    // The books, from what is there: 10 buyers, 10 order statuses, 10 events, no stock left.
    expect(await fx.admin.get(keys.stock)).toBe('0')
    expect(await fx.admin.hlen(keys.buyers)).toBe(STOCK)
    expect(await fx.admin.hlen(keys.status)).toBe(STOCK)
    expect(await fx.admin.xlen(keys.orders)).toBe(STOCK)
    const sold = new Set([...orders.values(), ...late.flatMap((r) => (r.status === 200 ? [r.orderId!] : []))])
    expect(sold.size).toBe(STOCK)
  })

  it('with the old `user default off` alone the same restart loses what the scripts wrote', async () => {
    const fx = await start('off')
    await sellSix(fx)
    const keys = saleKeys(PRODUCT)
    expect(Object.keys(await readKeyspace(fx.node))).toEqual(
      expect.arrayContaining([keys.meta, keys.stock, keys.buyers, keys.idem, keys.status, keys.orders]),
    )

    await fx.node.kill()
    await fx.node.restart()
    const after = await readKeyspace(fx.node)
    for (const key of [keys.meta, keys.stock, keys.buyers, keys.idem, keys.status, keys.orders]) {
      expect(after[key], key).toBeUndefined()
    }
  })
})
