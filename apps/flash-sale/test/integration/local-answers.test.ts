// Issue 15: a sold-out sale's flood answered from the instances' memory, with exactly Redis's
// answers, never a sale from memory. Two service processes on a 3+3 Cluster; a control app in
// this process with LOCAL_ANSWERS=false gives the answers of the Redis path for the same requests.
import { randomUUID } from 'node:crypto'
import { connect } from 'node:net'
import { Cluster, Redis } from 'ioredis'
import { keySlot } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type App, buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { saleKeys } from '../../src/redis/keys.js'
import { createRuntime, type Runtime } from '../../src/runtime.js'
import { eventually } from '../support/eventually.js'
import { useStack } from '../support/stack-fixture.js'

interface Answer {
  status: number
  body: { order_id?: string; status?: string; error?: { code: string; message: string; order_id?: string } }
}

describe('a sold-out sale answered from memory', () => {
  const fx = useStack({ strategy: 'lua', instances: 2, lockNodes: false }, { db: 'fs_local' })
  let control: { runtime: Runtime; app: App }
  let admin: Cluster

  beforeAll(async () => {
    const runtime = await createRuntime(loadConfig({ ...fx.stack.env, LOCAL_ANSWERS: 'false', PORT: '0' }))
    control = { runtime, app: await buildApp(runtime.deps) }
    admin = new Cluster(fx.stack.cluster.startupNodes, {
      redisOptions: { username: fx.stack.redisAdmin.username, password: fx.stack.redisAdmin.password },
    })
  }, 60_000)

  afterAll(async () => {
    admin?.disconnect()
    await control?.app.close()
    await control?.runtime.close()
  })

  const body = (productId: string, userId: number | string) =>
    JSON.stringify({ product_id: productId, user_id: userId })

  /** Through the stack's port: node:cluster spreads the connections over both instances. */
  async function checkout(productId: string, userId: number | string, key?: string): Promise<Answer> {
    const res = await fetch(`${fx.stack.url}/v1/checkout`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      body: body(productId, userId),
    })
    return { status: res.status, body: (await res.json()) as Answer['body'] }
  }

  /** The Redis path's answer to the same request (the control app, no memory). */
  async function viaRedis(productId: string, userId: number | string, key?: string): Promise<Answer> {
    const res = await control.app.inject({
      method: 'POST',
      url: '/v1/checkout',
      headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
      payload: body(productId, userId),
    })
    return { status: res.statusCode, body: res.json() as Answer['body'] }
  }

  /** Sum over both instances of a counter or histogram count on the summed /metrics page. */
  async function metric(name: string, labels = ''): Promise<number> {
    const page = await fetch(fx.stack.metricsUrl!).then((r) => r.text())
    let sum = 0
    for (const line of page.split('\n')) {
      if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) {
        if (labels && !line.includes(labels)) continue
        sum += Number(line.slice(line.lastIndexOf(' ') + 1))
      }
    }
    return sum
  }

  /** The control app (the route, no memory) listening: raw answers to compare bytes with. */
  let controlAt: string | undefined
  async function controlUrl(): Promise<string> {
    controlAt ??= await control.app.listen({ host: '127.0.0.1', port: 0 })
    return controlAt
  }

  /** An HTTP/1.1 request as bytes; `chunks` sends the body chunked. */
  function request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string,
    chunks?: string[],
  ) {
    const lines = [`${method} ${path} HTTP/1.1`, 'host: 127.0.0.1', 'connection: close']
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
    if (chunks)
      return `${lines.join('\r\n')}\r\n\r\n${chunks.map((c) => `${Buffer.byteLength(c).toString(16)}\r\n${c}\r\n`).join('')}0\r\n\r\n`
    lines.push(`content-length: ${Buffer.byteLength(body)}`)
    return `${lines.join('\r\n')}\r\n\r\n${body}`
  }

  /** The whole answer to `req`, as bytes (the request asks the server to close after it). */
  function raw(url: string, req: string): Promise<string> {
    const { hostname, port } = new URL(url)
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname)
      let data = ''
      socket.setEncoding('latin1')
      socket.on('data', (d: string) => {
        data += d
      })
      socket.on('error', reject)
      socket.on('close', () => resolve(data))
      socket.write(req, 'latin1')
    })
  }

  /** An answer without what differs between two sends of it: its date and the time spent. */
  const normalized = (answer: string) =>
    answer
      .replace(/\r\ndate: [^\r]*/i, '\r\ndate: -')
      .replace(/server-timing: app;dur=[\d.]+/i, 'server-timing: app;dur=-')

  async function sellOut(productId: string, stock: number): Promise<Map<number, string>> {
    await fx.stack.putSale({ productId, stock })
    const buyers = new Map<number, string>()
    for (let u = 1; buyers.size < stock; u++) {
      const a = await checkout(productId, u)
      expect(a.status).toBe(200)
      buyers.set(u, a.body.order_id!)
    }
    // Both instances learn it (the batch that sold the last unit, and its notification).
    await eventually(
      async () => {
        const before = await metric('flash_sale_local_answers_total')
        await Promise.all(Array.from({ length: 20 }, (_, i) => checkout(productId, 10_000 + i)))
        return (await metric('flash_sale_local_answers_total')) - before
      },
      (n) => n >= 20,
      { timeoutMs: 20_000, what: 'both instances answering from memory' },
    )
    return buyers
  }

  it('non-buyers, buyers, keys used before the sell-out, unknown products: the Redis path answers, without a reservation call', async () => {
    const productId = '8101'
    await fx.stack.putSale({ productId, stock: 5 })
    // Keys used before the sell-out: one that won, one that was refused (a second unit for a buyer).
    const won = randomUUID()
    const wonAnswer = await checkout(productId, 1, won)
    expect(wonAnswer.status).toBe(200)
    const refused = randomUUID()
    const refusedAnswer = await checkout(productId, 1, refused)
    expect(refusedAnswer.body.error?.code).toBe('ALREADY_PURCHASED')
    const buyers = new Map<number, string>([[1, wonAnswer.body.order_id!]])
    for (let u = 2; buyers.size < 5; u++) buyers.set(u, (await checkout(productId, u)).body.order_id!)
    await eventually(
      async () => {
        const before = await metric('flash_sale_local_answers_total')
        await Promise.all(Array.from({ length: 20 }, (_, i) => checkout(productId, 20_000 + i)))
        return (await metric('flash_sale_local_answers_total')) - before
      },
      (n) => n >= 20,
      { timeoutMs: 20_000, what: 'both instances answering from memory' },
    )

    const reserveCalls = () => metric('flash_sale_reserve_batch_size_count', 'kind="reserve"')
    const before = await reserveCalls()
    const localBefore = await metric('flash_sale_local_answers_total')
    const asked: { user: number | string; key?: string; answer: Answer }[] = []
    // From both instances (many connections): non-buyers, buyers, repeats of the old keys, new keys.
    for (let i = 0; i < 40; i++) {
      const user = 30_000 + i
      asked.push({ user, answer: await checkout(productId, user) })
      const key = randomUUID()
      asked.push({ user, key, answer: await checkout(productId, user, key) })
    }
    for (const [user] of buyers) asked.push({ user, answer: await checkout(productId, user) })
    asked.push({ user: 1, key: won, answer: await checkout(productId, 1, won) })
    asked.push({ user: 1, key: refused, answer: await checkout(productId, 1, refused) })
    expect(await reserveCalls()).toBe(before)
    expect((await metric('flash_sale_local_answers_total')) - localBefore).toBe(asked.length)

    const codes = asked.map((a) => a.answer.body.error?.code ?? a.answer.status)
    expect(codes.filter((c) => c === 'SOLD_OUT')).toHaveLength(80)
    for (const [user, orderId] of buyers) {
      const a = asked.find((x) => x.user === user && x.key === undefined)!
      expect(a.answer.body.error).toMatchObject({ code: 'ALREADY_PURCHASED', order_id: orderId })
    }
    // The key that won gets its order again (its replay, confirmed on a replica), the refused one
    // its refusal.
    expect(asked.at(-2)!.answer).toEqual(wonAnswer)
    expect(asked.at(-1)!.answer).toEqual(refusedAnswer)
    // The Redis path answers every one of these requests with the same body.
    for (const a of asked) expect(await viaRedis(productId, a.user, a.key)).toEqual(a.answer)
    // An unknown product is still 404 (never remembered).
    expect((await checkout('8199', 1)).status).toBe(404)
    // Another user with a recorded key: the Redis path's 422.
    const someoneElse = await checkout(productId, 99_999, asked[1]!.key)
    expect(someoneElse).toEqual(await viaRedis(productId, 99_999, asked[1]!.key))
    expect(someoneElse.status).toBe(422)
  })

  it('restock after the sell-out: both instances sell again within 1 s, and the epoch grew', async () => {
    const productId = '8102'
    await sellOut(productId, 3)
    const epochBefore = await metric('flash_sale_sale_epoch', `product_id="${productId}"`)
    const res = await fetch(`${fx.stack.url}/admin/sales/${productId}/restock`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fx.stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ units: 20 }),
    })
    const restocked = (await res.json()) as { epoch: number; remaining: number }
    const at = Date.now()
    expect(res.status).toBe(200)
    expect(restocked.remaining).toBe(20)
    // Every connection: each of the 20 units is sold, on whichever instance.
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => checkout(productId, 40_000 + i)))
    // 202: reserved, no replica acknowledged it within WAIT_TIMEOUT_MS (a loaded machine).
    const sold = answers.filter((a) => a.status === 200 || a.status === 202).length
    expect(sold).toBe(20)
    expect(Date.now() - at).toBeLessThan(1_000 + 2_000) // 1 s promised, with a loaded machine's slack
    expect(restocked.epoch).toBeGreaterThan(epochBefore)
    await eventually(
      () => metric('flash_sale_sale_epoch', `product_id="${productId}"`),
      (e) => e === restocked.epoch,
      { what: 'the new epoch on the instances' },
    )
  })

  it('repeats of keys refused after the sell-out: answered from memory (no script call), the bodies of the Redis path, and after a restock too', async () => {
    const productId = '8107'
    const buyers = await sellOut(productId, 3)
    const refuseCalls = () => metric('flash_sale_reserve_batch_size_count', 'kind="refuse"')
    const reserveCalls = () => metric('flash_sale_reserve_batch_size_count', 'kind="reserve"')
    // 30 keys: non-buyers (SOLD_OUT) and buyers (ALREADY_PURCHASED), each recorded once.
    const keys = Array.from({ length: 30 }, (_, i) => ({
      user: i % 10 === 0 ? [...buyers.keys()][(i / 10) % 3]! : 70_000 + i,
      key: randomUUID(),
    }))
    const first = new Map<string, Answer>()
    for (const k of keys) first.set(k.key, await checkout(productId, k.user, k.key))
    const refuseBefore = await refuseCalls()
    const reserveBefore = await reserveCalls()
    // Six repeats of each, over both instances: an instance that has not seen a key asks Redis
    // once (a replay it then keeps), so at most one call per key for the other instance.
    const repeats: { user: number; key: string; answer: Answer }[] = []
    for (let round = 0; round < 6; round++) {
      const answers = await Promise.all(keys.map((k) => checkout(productId, k.user, k.key)))
      for (const [i, answer] of answers.entries()) repeats.push({ ...keys[i]!, answer })
    }
    expect((await refuseCalls()) - refuseBefore).toBeLessThanOrEqual(keys.length)
    expect(await reserveCalls()).toBe(reserveBefore)
    for (const r of repeats) expect(r.answer).toEqual(first.get(r.key))
    const codes = new Set([...first.values()].map((a) => a.body.error?.code))
    expect(codes).toEqual(new Set(['SOLD_OUT', 'ALREADY_PURCHASED']))
    // Someone else with a remembered key: the Redis path's 422.
    const reused = await checkout(productId, 99_998, keys[1]!.key)
    expect(reused.status).toBe(422)
    expect(reused).toEqual(await viaRedis(productId, 99_998, keys[1]!.key))
    for (const k of keys.slice(0, 5))
      expect(await viaRedis(productId, k.user, k.key)).toEqual(first.get(k.key))

    // A restock: the keys keep their answers (recorded in Redis), and the units go to others.
    const res = await fetch(`${fx.stack.url}/admin/sales/${productId}/restock`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fx.stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ units: 2 }),
    })
    expect(res.status).toBe(200)
    for (const k of keys) expect(await checkout(productId, k.user, k.key)).toEqual(first.get(k.key))
    const sold = await Promise.all(Array.from({ length: 4 }, (_, i) => checkout(productId, 80_000 + i)))
    expect(sold.filter((a) => a.status === 200 || a.status === 202)).toHaveLength(2)
    for (const k of keys) expect(await checkout(productId, k.user, k.key)).toEqual(first.get(k.key))
  })

  it("the refusal lane: its answers are the route's byte for byte, and what it cannot answer reaches the route whole", async () => {
    const productId = '8108'
    const buyers = await sellOut(productId, 3)
    const lane = () => metric('flash_sale_refusal_lane_answers_total')
    // Until both instances answer in the lane (each once its snapshot is loaded).
    await eventually(
      async () => {
        const before = await lane()
        await Promise.all(Array.from({ length: 20 }, (_, i) => checkout(productId, 11_000 + i)))
        return (await lane()) - before
      },
      (n) => n === 20,
      { timeoutMs: 20_000, what: 'both instances answering in the lane' },
    )
    const control = await controlUrl()
    const buyer = [...buyers.keys()][0]!
    const post = (body: string, headers: Record<string, string> = {}, url = '/v1/checkout') =>
      request('POST', url, { 'content-type': 'application/json', ...headers }, body)

    // Answered in the lane: keyless non-buyers and buyers, ids as strings, a key's repeats.
    const key = randomUUID()
    expect((await checkout(productId, 12_345, key)).status).toBe(409) // recorded (refuse.lua)
    const inLane = [
      post(body(productId, 12_000)),
      post(JSON.stringify({ product_id: Number(productId), user_id: 12_001 })),
      post(JSON.stringify({ user_id: 'u-12002', product_id: productId, extra: [1, 2] })),
      post(body(productId, buyer)),
      post(body(productId, 12_003), { 'content-type': 'Application/JSON; charset=UTF-8' }),
    ]
    const before = await lane()
    for (const req of inLane) {
      const [viaLane, viaRoute] = [await raw(fx.stack.url, req), await raw(control, req)]
      expect(normalized(viaLane)).toBe(normalized(viaRoute))
      expect(viaLane).toMatch(/^HTTP\/1\.1 409 Conflict\r\n/)
    }
    expect((await lane()) - before).toBe(inLane.length)
    // The key's repeats: whichever instance saw it recorded answers them in the lane, the other
    // records them once (refuse.lua's replay) and then answers in the lane too.
    const repeat = post(body(productId, 12_345), { 'idempotency-key': key })
    for (let i = 0; i < 6; i++)
      expect(normalized(await raw(fx.stack.url, repeat))).toBe(normalized(await raw(control, repeat)))
    const reused = post(body(productId, 12_346), { 'idempotency-key': key })
    expect(normalized(await raw(fx.stack.url, reused))).toBe(normalized(await raw(control, reused)))
    expect(await raw(fx.stack.url, reused)).toMatch(/^HTTP\/1\.1 422 /)

    // First uses of keys: recorded by the lane (refuse.lua) before it answers, the route's bytes
    // (the control, asked second, replays what the lane recorded), each counted by the lane.
    const fresh = [
      post(body(productId, 12_400), { 'idempotency-key': randomUUID() }),
      post(body(productId, buyer), { 'idempotency-key': randomUUID() }),
      post(JSON.stringify({ product_id: Number(productId), user_id: 'u-12401' }), {
        'idempotency-key': randomUUID(),
      }),
    ]
    const freshBefore = await lane()
    for (const req of fresh) {
      const viaLane = await raw(fx.stack.url, req)
      expect(viaLane).toMatch(/^HTTP\/1\.1 409 Conflict\r\n/)
      expect(normalized(viaLane)).toBe(normalized(await raw(control, req)))
    }
    expect((await lane()) - freshBefore).toBe(fresh.length)
    // Recorded: after a restock, these keys keep their refusal (the restock test below does the same
    // for keys recorded through the route); here, the record itself.
    const idem = await admin.hgetall(saleKeys(productId).idem)
    expect(
      Object.values(idem).filter((v) => /^(SOLD_OUT\|\||ALREADY_PURCHASED\|)/.test(v)).length,
    ).toBeGreaterThanOrEqual(fresh.length)

    // Not the lane's: each reaches the route as sent (its body read by the lane and replayed, or
    // not read at all), and gets the route's answer.
    const routed = [
      post('{"product_id":8108,'), // not JSON
      post(JSON.stringify({ product_id: productId })), // no user_id
      post(JSON.stringify({ product_id: productId, user_id: 0 })),
      post(JSON.stringify({ product_id: true, user_id: 1 })),
      post('[1,2]'),
      post('null'),
      post('{"product_id":8108,"user_id":5,"__proto__":{"x":1}}'),
      post('{"product_id":8108,"user_id":5,"constructor":{"prototype":{"x":1}}}'),
      post(JSON.stringify({ product_id: productId, user_id: 6, pad: 'x'.repeat(1_100) })), // over the limit
      post(body(productId, 7), { 'content-type': 'text/plain' }),
      post(body(productId, 8), { 'idempotency-key': 'has space' }),
      post(body(productId, 9), {}, '/v1/checkout?x=1'),
      request(
        'POST',
        '/v1/checkout',
        { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        '',
        [body(productId, 10)],
      ),
      post(body('8199', 11)), // an unknown product
    ]
    const laneBefore = await lane()
    for (const req of routed)
      expect(normalized(await raw(fx.stack.url, req))).toBe(normalized(await raw(control, req)))
    expect(await lane()).toBe(laneBefore)

    // A sale that is selling, while another is sold out (the lane reads every checkout): sold.
    await fx.stack.putSale({ productId: '8109', stock: 5 })
    const sold = await raw(fx.stack.url, post(body('8109', 13_000)))
    expect(sold).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    expect(JSON.parse(sold.slice(sold.indexOf('\r\n\r\n') + 4))).toMatchObject({
      status: 'reserved',
      user_id: 13_000,
    })
    expect(await lane()).toBe(laneBefore)
  })

  it('a lost notification (the subscriber cut off): never oversold, selling again within the documented bound', async () => {
    const productId = '8103'
    await sellOut(productId, 3)
    const master = await fx.stack.cluster.slotOwner(keySlot(saleKeys(productId).events))
    const direct = new Redis({
      host: master.host,
      port: master.port,
      username: fx.stack.redisAdmin.username,
      password: fx.stack.redisAdmin.password,
    })
    // Forbid the app's sharded subscriptions and drop its subscribers: the next notifications are lost.
    await direct.call('ACL', 'SETUSER', 'flash-sale', '-ssubscribe')
    await direct.call('CLIENT', 'KILL', 'TYPE', 'pubsub')
    const resyncsBefore = await metric('flash_sale_sale_resyncs_total')
    try {
      const at = Date.now()
      const res = await fetch(`${fx.stack.url}/admin/sales/${productId}/restock`, {
        method: 'POST',
        headers: { authorization: `Bearer ${fx.stack.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ units: 10 }),
      })
      expect(res.status).toBe(200)
      // Keep buying until all 10 are sold; never more.
      let sold = 0
      let user = 50_000
      let firstSaleAt = 0
      await eventually(
        async () => {
          const answers = await Promise.all(Array.from({ length: 10 }, () => checkout(productId, user++)))
          const ok = answers.filter((a) => a.status === 200 || a.status === 202).length
          if (ok > 0 && firstSaleAt === 0) firstSaleAt = Date.now()
          sold += ok
          return sold
        },
        (n) => n >= 10,
        { timeoutMs: 20_000, intervalMs: 50, what: 'the 10 restocked units sold' },
      )
      expect(sold).toBe(10)
      // Without the notification: the per-second epoch check, plus a loaded machine's slack.
      console.log(`[local-answers] notification lost: first sale ${firstSaleAt - at} ms after the restock`)
      expect(firstSaleAt - at).toBeLessThan(1_000 + 2_000)
      expect(await metric('flash_sale_sale_resyncs_total')).toBeGreaterThan(resyncsBefore)
      const after = await Promise.all(Array.from({ length: 20 }, () => checkout(productId, user++)))
      expect(after.every((a) => a.body.error?.code === 'SOLD_OUT')).toBe(true)
    } finally {
      await direct.call('ACL', 'SETUSER', 'flash-sale', '+ssubscribe')
      direct.disconnect()
    }
  })

  it('kill -9 of the sale master after the sell-out: the answers stay right through the failover', {
    timeout: 120_000,
  }, async () => {
    const productId = '8104'
    const buyers = await sellOut(productId, 4)
    const master = await fx.stack.cluster.slotOwner(keySlot(saleKeys(productId).stock))
    const answers: Answer[] = []
    let slowest = 0
    const stop = new AbortController()
    const load = (async () => {
      for (let u = 60_000; !stop.signal.aborted; u++) {
        const sent = performance.now()
        answers.push(
          await checkout(
            productId,
            u % 7 === 0 ? [...buyers.keys()][u % 4]! : u,
            u % 2 ? randomUUID() : undefined,
          ),
        )
        slowest = Math.max(slowest, performance.now() - sent)
      }
    })()
    await fx.stack.cluster.failover(master)
    await new Promise((r) => setTimeout(r, 3_000))
    stop.abort()
    await load
    await fx.stack.cluster.rejoin(master)
    // No sale, and every answer a refusal Redis would give (or 503 while the slot moved).
    const odd = answers.filter(
      (a) => a.status !== 503 && !['SOLD_OUT', 'ALREADY_PURCHASED'].includes(a.body.error?.code ?? ''),
    )
    expect(odd).toEqual([])
    for (const a of answers.filter((x) => x.body.error?.code === 'ALREADY_PURCHASED'))
      expect([...buyers.values()]).toContain(a.body.error?.order_id)
    expect(answers.filter((a) => a.status === 409).length).toBeGreaterThan(50)
    // Every answer within one checkout deadline (2 s) and slack, first uses of keys included (the
    // refusal lane records them; one it cannot record in time it answers 503 itself).
    console.log(`[local-answers] failover: slowest answer ${slowest.toFixed(0)} ms`)
    expect(slowest).toBeLessThan(3_500)
  })

  it('SALE_NOT_STARTED is not kept under the key: the same key buys once the sale opens', async () => {
    const productId = '8106'
    const startsAt = new Date(Date.now() + 2_000)
    const res = await fetch(`${fx.stack.url}/admin/sales/${productId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${fx.stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ stock: 5, price: 10, starts_at: startsAt.toISOString() }),
    })
    expect(res.status).toBe(200)
    const key = randomUUID()
    expect((await checkout(productId, 7, key)).body.error?.code).toBe('SALE_NOT_STARTED')
    const bought = await eventually(
      () => checkout(productId, 7, key),
      (a) => a.status !== 409,
      { timeoutMs: 15_000, intervalMs: 200, what: 'the sale open' },
    )
    expect(bought.status).toBe(200)
    // Kept from then on: the same key replays the order.
    expect(await checkout(productId, 7, key)).toEqual(bought)
  })

  it('one batch answers as its checkouts one after the other: repeats of a key, a user at the limit, the last unit, a failing checkout', async () => {
    // reserve.lua reads the batch's keys and buyers once and writes its effects at the end
    // (issue 24): a later checkout of the batch must still see what an earlier one did.
    const store = control.runtime.deps.store
    const steps = (p: string): [string, string | undefined][] => [
      ['a', `${p}-k1`],
      ['a', `${p}-k1`], // the same key again: its answer, replayed
      ['b', `${p}-k1`], // another user's key
      ['a', `${p}-k2`], // a second unit for a (the limit is 2)
      ['a', `${p}-k3`], // a at the limit
      ['poison', undefined], // fails inside the script, alone
      ['c', undefined],
      ['d', `${p}-k4`], // the last unit
      ['e', `${p}-k5`],
      ['e', `${p}-k5`],
      ['c', `${p}-k6`], // c may buy a second unit: none left
    ]
    type Settled = PromiseSettledResult<Awaited<ReturnType<typeof store.reserve>>>
    const run = (productId: string, [userId, key]: [string, string | undefined]) =>
      store.reserve({
        productId,
        userId,
        orderId: `o-${userId}-${key ?? 'none'}`,
        idempotencyKey: key,
        roomGen: '',
      })
    // The two sales' names differ only in the product id inside keys and order ids.
    const norm = (x: string) => x.replace(/\d{4}-k/g, 'k').replace(/\|\d{13}$/, '|t')
    const shape = (r: Settled) =>
      r.status === 'rejected'
        ? { error: (r.reason as { code?: string }).code }
        : { code: r.value.code, order: norm(r.value.orderId), replayed: r.value.replayed }
    const state = async (productId: string) => {
      const k = saleKeys(productId)
      const hash = async (key: string) =>
        Object.fromEntries(Object.entries(await admin.hgetall(key)).map(([f, v]) => [norm(f), norm(v)]))
      const events = (await admin.xrange(k.orders, '-', '+')) as [string, string[]][]
      return {
        stock: await admin.get(k.stock),
        buyers: await hash(k.buyers),
        idem: await hash(k.idem),
        status: await hash(k.status),
        events: events.map(([, f]) => norm(f.slice(0, 8).join(' '))),
      }
    }
    // The comparison is of what the scripts wrote: with the worker running, it confirmed
    // 8111's orders (status "confirmed") while 8112's were still being reserved, and the two
    // states differed by the worker's progress alone (seen in CI). It is stopped for this test.
    await fx.stack.worker.stop()
    try {
      await compareBatchWithAlone()
    } finally {
      fx.stack.worker.start()
    }

    async function compareBatchWithAlone() {
      for (const productId of ['8111', '8112']) {
        await fx.stack.putSale({ productId, stock: 4, perUserLimit: 2 })
        await admin.hset(saleKeys(productId).buyers, 'poison', 'not-a-count')
      }
      // 8111: all in one turn, so one reserve.lua call; 8112: one call each, in the same order.
      const together = await Promise.allSettled(steps('8111').map((s) => run('8111', s)))
      const alone: Settled[] = []
      for (const s of steps('8112')) alone.push(...(await Promise.allSettled([run('8112', s)])))
      expect(together.map(shape)).toEqual([
        { code: 'RESERVED', order: 'o-a-k1', replayed: false },
        { code: 'RESERVED', order: 'o-a-k1', replayed: true },
        { code: 'IDEMPOTENCY_KEY_REUSED', order: '', replayed: true },
        { code: 'RESERVED', order: 'o-a-k2', replayed: false },
        { code: 'ALREADY_PURCHASED', order: 'o-a-k2', replayed: false },
        { error: 'E_RESERVATION_SCRIPT' },
        { code: 'RESERVED', order: 'o-c-none', replayed: false },
        { code: 'RESERVED', order: 'o-d-k4', replayed: false },
        { code: 'SOLD_OUT', order: '', replayed: false },
        { code: 'SOLD_OUT', order: '', replayed: true },
        { code: 'SOLD_OUT', order: '', replayed: false },
      ])
      expect(together.map(shape)).toEqual(alone.map(shape))
      const left = await state('8111')
      expect(left).toEqual(await state('8112'))
      expect(left.stock).toBe('0')
      // "<live units>|<last live order>|<orders by unit number>" (reserve.lua)
      expect(left.buyers).toEqual({
        a: '2|o-a-k2|o-a-k1,o-a-k2',
        c: '1|o-c-none|o-c-none',
        d: '1|o-d-k4|o-d-k4',
        poison: 'not-a-count',
      })
      expect(left.idem).toEqual({
        k1: 'RESERVED|o-a-k1|a',
        k2: 'RESERVED|o-a-k2|a',
        k3: 'ALREADY_PURCHASED|o-a-k2|a',
        k4: 'RESERVED|o-d-k4|d',
        k5: 'SOLD_OUT||e',
        k6: 'SOLD_OUT||c',
      })
      expect(Object.keys(left.status).sort()).toEqual(['o-a-k1', 'o-a-k2', 'o-c-none', 'o-d-k4'])
      expect(Object.values(left.status).every((v) => /^reserved\|[acd]\|\d+\|t$/.test(v))).toBe(true)
      expect(left.events).toEqual([
        'order_id o-a-k1 user_id a round 1 unit 1',
        'order_id o-a-k2 user_id a round 1 unit 2',
        'order_id o-c-none user_id c round 1 unit 1',
        'order_id o-d-k4 user_id d round 1 unit 1',
      ])
    }
  })

  it('a batch in which one checkout fails inside the script answers the others correctly', async () => {
    const productId = '8105'
    await fx.stack.putSale({ productId, stock: 100 })
    // A buyer record Redis would never write: that user's checkout errors inside reserve.lua.
    await admin.hset(saleKeys(productId).buyers, 'poison', 'not-a-count')
    const store = control.runtime.deps.store
    const users = Array.from({ length: 30 }, (_, i) => (i === 11 ? 'poison' : `b-${i}`))
    const replies = await Promise.allSettled(
      users.map((userId) =>
        store.reserve({
          productId,
          userId,
          orderId: `${productId}.o-${userId}`,
          idempotencyKey: undefined,
          roomGen: '',
        }),
      ),
    )
    expect(replies[11]).toMatchObject({ status: 'rejected', reason: { code: 'E_RESERVATION_SCRIPT' } })
    const others = replies.filter((_, i) => i !== 11)
    expect(others.every((r) => r.status === 'fulfilled' && r.value.code === 'RESERVED')).toBe(true)
    expect(Number(await admin.get(saleKeys(productId).stock))).toBe(71)
  })
})
