import { until } from '@kunci/topology'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { App } from '../../src/app.js'
import { saleKeys } from '../../src/redis/keys.js'
import type { Runtime } from '../../src/runtime.js'
import { drawOrder } from '../../src/waiting-room/lottery.js'
import { roomKeys } from '../../src/waiting-room/room-keys.js'
import { TicketSigner } from '../../src/waiting-room/ticket.js'
import { WaitingRoom } from '../../src/waiting-room/waiting-room.js'
import { type InProcessApp, startInProcessApp } from '../support/in-process-app.js'

const TOKEN = 'test-admin-token-0123456789'
const SECRET = 'waiting-room-test-secret-0123456789abcdef'
const ROOM = { admit_per_second: 1_000, max_admitted: 1_000, admission_seconds: 60 }

let fx: InProcessApp
let redis: Redis
let runtime: Runtime
let app: App

beforeAll(async () => {
  fx = await startInProcessApp('fs_room', {
    ADMIN_TOKEN: TOKEN,
    DURABILITY: 'none',
    WAITING_ROOM_SECRET: SECRET,
  })
  runtime = fx.runtime
  app = fx.app
  redis = new Redis({ host: fx.node.host, port: fx.node.port })
}, 60_000)

afterAll(async () => {
  redis?.disconnect()
  await fx?.close()
})

const putSale = (id: string, body: Record<string, unknown>) =>
  app.inject({
    method: 'PUT',
    url: `/admin/sales/${id}`,
    headers: { authorization: `Bearer ${TOKEN}` },
    payload: { stock: 10, price: 10, ...body },
  })
const join = (id: string, user: string | number) =>
  app.inject({ method: 'POST', url: `/v1/sales/${id}/queue`, payload: { user_id: user } })
const poll = (ticket: string) => app.inject({ method: 'GET', url: `/v1/queue/${ticket}` })
const checkout = (id: string, user: string | number, ticket?: string, key?: string) =>
  app.inject({
    method: 'POST',
    url: '/v1/checkout',
    headers: {
      'content-type': 'application/json',
      ...(ticket === undefined ? {} : { 'waiting-room-ticket': ticket }),
      ...(key ? { 'idempotency-key': key } : {}),
    },
    payload: { product_id: id, user_id: user },
  })
const errorOf = (res: { json(): unknown }) => (res.json() as { error: Record<string, unknown> }).error

describe('the admin field', () => {
  it('creates a room, reports its settings and the lottery commitment; null or absent means none', async () => {
    const res = await putSale('r-admin', { waiting_room: ROOM })
    expect(res.statusCode).toBe(200)
    const room = res.json().waiting_room
    expect(room).toMatchObject({
      ...ROOM,
      stock_factor: 2,
      drop_after_seconds: 60,
      queue_url: '/v1/sales/r-admin/queue',
      page_url: '/queue/r-admin',
    })
    expect(room.lottery_commitment).toMatch(/^[0-9a-f]{64}$/)
    expect((await join('r-admin', 1)).statusCode).toBe(200)
    const off = await putSale('r-admin', { waiting_room: null })
    expect(off.statusCode).toBe(200)
    expect(off.json().waiting_room).toBeNull()
    expect(await redis.exists(roomKeys('r-admin').room, roomKeys('r-admin').users)).toBe(0)
    expect(errorOf(await join('r-admin', 1)).code).toBe('NO_WAITING_ROOM')
  })

  it.each([
    [{ admit_per_second: 0, max_admitted: 1, admission_seconds: 60 }, 'waiting_room.admit_per_second'],
    [{ admit_per_second: 1, max_admitted: 0, admission_seconds: 60 }, 'waiting_room.max_admitted'],
    [{ admit_per_second: 1, max_admitted: 1, admission_seconds: 1 }, 'waiting_room.admission_seconds'],
    [{ ...ROOM, stock_factor: 0.2 }, 'waiting_room.stock_factor'],
    [{ ...ROOM, drop_after_seconds: 5 }, 'waiting_room.drop_after_seconds'],
    [{ ...ROOM, admit_rate: 5 }, 'waiting_room.admit_rate'],
    ['on', 'waiting_room'],
  ])('refuses %j with 400 naming %s, and touches nothing', async (waiting_room, field) => {
    const res = await putSale('r-bad', { waiting_room })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res)).toMatchObject({ code: 'INVALID_REQUEST', field })
    expect(typeof errorOf(res).rule).toBe('string')
    expect(await redis.exists(saleKeys('r-bad').meta, roomKeys('r-bad').room)).toBe(0)
  })
})

describe('with the redlock strategy', () => {
  it('a room is refused at PUT (its stock is in SQL), and its checkouts check no ticket', async () => {
    let reset = false
    const refused = await runtime.deps.waitingRoom
      .putSaleWithRoom({
        productId: 'r-redlock',
        body: { waiting_room: ROOM },
        strategy: 'redlock',
        putSale: async () => {
          reset = true
          return {}
        },
      })
      .catch((err: unknown) => err)
    expect(refused).toMatchObject({ code: 'INVALID_REQUEST', details: { field: 'waiting_room' } })
    expect(reset).toBe(false)
    // A room left in Redis by an earlier lua deployment does not make redlock depend on Redis.
    await putSale('r-redlock', { waiting_room: ROOM })
    const room = runtime.deps.waitingRoom
    const redlockRoom = new WaitingRoom(room.store, room.signer, room.metrics, false)
    await expect(redlockRoom.admit('r-redlock', 'u', undefined)).resolves.toBe('')
    await expect(room.admit('r-redlock', 'u', undefined)).rejects.toMatchObject({ code: 'WAITING_ROOM' })
  })
})

describe('without a room', () => {
  it('checkouts need no ticket (a stray one is ignored); the queue says NO_WAITING_ROOM', async () => {
    expect((await putSale('r-off', {})).statusCode).toBe(200)
    expect((await checkout('r-off', 1)).statusCode).toBe(200)
    expect((await checkout('r-off', 2, 'garbage')).statusCode).toBe(200)
    const res = await join('r-off', 3)
    expect(res.statusCode).toBe(404)
    expect(errorOf(res).code).toBe('NO_WAITING_ROOM')
    expect(errorOf(await join('nothing-here', 3)).code).toBe('NO_WAITING_ROOM')
  })
})

describe('with a room', () => {
  it('one place per user: joining again returns the same ticket and position', async () => {
    await putSale('r-one', { stock: 0, waiting_room: ROOM })
    const first = (await join('r-one', 'alice')).json()
    await join('r-one', 'bob')
    const again = await Promise.all([join('r-one', 'alice'), join('r-one', 'alice'), poll(first.ticket)])
    for (const res of again) {
      expect(res.statusCode).toBe(200)
      expect(res.json()).toMatchObject({ ticket: first.ticket, position: 1 })
    }
    expect((await join('r-one', 'bob')).json().position).toBe(2)
  })

  it('checkout: no ticket 429 WAITING_ROOM, waiting 429 NOT_ADMITTED, admitted → 200 once', async () => {
    // max_admitted 1: the second user waits behind the first.
    await putSale('r-gate', { stock: 5, waiting_room: { ...ROOM, max_admitted: 1 } })
    const a = (await join('r-gate', 'a')).json()
    const b = (await join('r-gate', 'b')).json()
    expect(a).toMatchObject({ status: 'admitted', position: null, draw: 'done' })
    expect(Date.parse(a.admitted_until)).toBeGreaterThan(Date.now() + 50_000)
    expect(b).toMatchObject({ status: 'waiting', position: 1, waiting: 1 })

    const none = await checkout('r-gate', 'a')
    expect(none.statusCode).toBe(429)
    expect(none.headers['retry-after']).toBe('1')
    expect(errorOf(none)).toMatchObject({
      code: 'WAITING_ROOM',
      queue_url: '/v1/sales/r-gate/queue',
      page_url: '/queue/r-gate',
    })
    const early = await checkout('r-gate', 'b', b.ticket)
    expect(early.statusCode).toBe(429)
    expect(early.headers['retry-after']).toBeDefined()
    expect(errorOf(early)).toMatchObject({ code: 'NOT_ADMITTED', position: 1 })
    expect(await redis.hlen(saleKeys('r-gate').buyers)).toBe(0) // nothing reserved so far

    const bought = await checkout('r-gate', 'a', a.ticket, 'k-a')
    expect(bought.statusCode).toBe(200)
    expect((await checkout('r-gate', 'a', a.ticket, 'k-a')).json().order_id).toBe(bought.json().order_id)
    expect(errorOf(await checkout('r-gate', 'a', a.ticket)).code).toBe('ALREADY_PURCHASED')
    // a bought: the sweep retires it (every 200 ms) and b moves in.
    await until(async () => (await poll(b.ticket)).json().status === 'admitted', 'b admitted', 10_000)
    expect((await poll(a.ticket)).json()).toMatchObject({
      status: 'closed',
      reason: 'purchased',
      order_id: bought.json().order_id,
    })
    expect((await checkout('r-gate', 'b', b.ticket, 'k-b')).statusCode).toBe(200)
    // Bought, then the admission lapsed: a retry still gets the reservation's own answer.
    await redis.zadd(roomKeys('r-gate').admitted, Date.now() - 1, 'b')
    expect((await checkout('r-gate', 'b', b.ticket, 'k-b')).statusCode).toBe(200)
    expect(errorOf(await checkout('r-gate', 'b', b.ticket)).code).toBe('ALREADY_PURCHASED')
    const m = await runtime.registry.getSingleMetricAsString('flash_sale_waiting_room_refusals_total')
    expect(m).toMatch(/code="WAITING_ROOM",reason=""} [1-9]/)
    expect(m).toMatch(/code="NOT_ADMITTED",reason=""} [1-9]/)
  })

  it('refuses forged, moved, stale and lapsed tickets with 403 INVALID_TICKET, never a 5xx', async () => {
    await putSale('r-forge', { waiting_room: ROOM })
    await putSale('r-forge2', { waiting_room: ROOM })
    const mine = (await join('r-forge', 'u1')).json()
    const other = (await join('r-forge', 'u2')).json()
    const otherSale = (await join('r-forge2', 'u1')).json()
    const foreign = new TicketSigner('some-other-service-secret-0123456789').sign({
      productId: 'r-forge',
      generation: '0000000000000000',
      userId: 'u1',
      orderKey: '1',
    })
    const [v, payload, mac] = mine.ticket.split('.')
    const cases: [string, string, string][] = [
      ['another key', foreign, 'signature'],
      ['another user', other.ticket, 'user'],
      ['another sale', otherSale.ticket, 'sale'],
      ['truncated', mine.ticket.slice(0, -3), 'malformed'],
      ['a flipped MAC', `${v}.${payload}.${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`, 'signature'],
      ['10 kB', 'v1.'.padEnd(10_240, 'A'), 'malformed'],
      ['empty', '', 'malformed'],
    ]
    for (const [name, ticket, reason] of cases) {
      const res = await checkout('r-forge', 'u1', ticket)
      expect(res.statusCode, name).toBe(403)
      expect(errorOf(res), name).toMatchObject({ code: 'INVALID_TICKET', reason })
    }
    for (const [name, ticket] of cases.filter(([n]) => n !== 'empty')) {
      const res = await poll(encodeURIComponent(ticket))
      if (name === 'another user' || name === 'another sale') expect(res.statusCode).toBe(200)
      else expect([res.statusCode, name]).toEqual([403, name])
    }
    // Lapsed: the admission's end moved into the past.
    await redis.zadd(roomKeys('r-forge').admitted, Date.now() - 1, 'u1')
    const lapsed = await checkout('r-forge', 'u1', mine.ticket)
    expect([lapsed.statusCode, errorOf(lapsed).reason]).toEqual([403, 'expired'])
    expect((await poll(mine.ticket)).json()).toMatchObject({ status: 'closed', reason: 'admission_expired' })
    // Joining again: a new place at the back, a new ticket.
    const rejoined = (await join('r-forge', 'u1')).json()
    expect(rejoined.ticket).not.toBe(mine.ticket)
    // A sale reset: every earlier ticket is stale.
    await putSale('r-forge', { waiting_room: ROOM })
    expect(errorOf(await checkout('r-forge', 'u1', rejoined.ticket)).reason).toBe('stale')
    expect(errorOf(await poll(rejoined.ticket)).reason).toBe('stale')
    expect(await redis.hlen(saleKeys('r-forge').buyers)).toBe(0)
  })

  /**
   * Each place as a poll shows it once the room has admitted `cap` users. Admission spends the
   * room's tokens too (1,000 a second): joins that land in one millisecond find none, and a later
   * visit admits them (a join's own answer may still say waiting). Once the cap is reached and
   * the tokens are plenty, only the cap decides, which is what the test is about.
   */
  async function settledStatuses(id: string, joined: { ticket: string }[], cap: number) {
    await until(async () => {
      for (const a of joined) await poll(a.ticket)
      return (await redis.zcard(roomKeys(id).admitted)) >= cap
    }, `${cap} admitted in room ${id}`)
    // One more visit after a pause with tokens to spare: a cap that did not hold shows here.
    await new Promise((r) => setTimeout(r, 50))
    const polled = []
    for (const a of joined) polled.push((await poll(a.ticket)).json())
    return polled as { status: string; position?: number }[]
  }

  it('never admits more than k × the units left, nor more than max_admitted', async () => {
    await putSale('r-k', { stock: 3, waiting_room: { ...ROOM, stock_factor: 1.5, max_admitted: 50 } })
    const answers = []
    for (let u = 1; u <= 10; u++) answers.push((await join('r-k', u)).json())
    // floor(1.5 × 3) = 4 admitted, 6 waiting in order.
    const settled = await settledStatuses('r-k', answers, 4)
    expect(settled.map((a) => a.status)).toEqual([...Array(4).fill('admitted'), ...Array(6).fill('waiting')])
    expect(settled.slice(4).map((a) => a.position)).toEqual([1, 2, 3, 4, 5, 6])
    // One buys: 2 left → floor(1.5 × 2) = 3 ≥ the 3 still holding an admission: nobody new.
    expect((await checkout('r-k', 1, answers[0].ticket)).statusCode).toBe(200)
    await new Promise((r) => setTimeout(r, 250)) // the purchase sweep runs every 200 ms
    expect((await poll(answers[4].ticket)).json().status).toBe('waiting')
    expect(await redis.zcard(roomKeys('r-k').admitted)).toBe(3)
    // max_admitted caps too, whatever the stock.
    await putSale('r-k', { stock: 1_000, waiting_room: { ...ROOM, max_admitted: 3 } })
    const capped = []
    for (let u = 1; u <= 6; u++) capped.push((await join('r-k', u)).json())
    const statuses = (await settledStatuses('r-k', capped, 3)).map((a) => a.status)
    expect(statuses).toEqual(['admitted', 'admitted', 'admitted', 'waiting', 'waiting', 'waiting'])
  })

  it('stock 0 → everyone waiting or admitted sees sold_out; units back → the line reopens, places kept', async () => {
    // k = 1.5: floor(1.5 × 2) = 3 admitted, 2 waiting.
    await putSale('r-sold', { stock: 2, waiting_room: { ...ROOM, stock_factor: 1.5 } })
    const a = []
    for (let u = 1; u <= 5; u++) a.push((await join('r-sold', u)).json())
    expect(a.map((x) => x.status)).toEqual(['admitted', 'admitted', 'admitted', 'waiting', 'waiting'])
    expect((await checkout('r-sold', 1, a[0].ticket)).statusCode).toBe(200)
    expect((await checkout('r-sold', 2, a[1].ticket)).statusCode).toBe(200) // the last unit
    const after = await Promise.all(a.slice(3).map((x) => poll(x.ticket)))
    expect(after.map((r) => r.json().status)).toEqual(['sold_out', 'sold_out'])
    expect(after.map((r) => r.json().position)).toEqual([1, 2])
    expect((await poll(a[2].ticket)).json().status).toBe('sold_out') // admitted, not bought
    const late = await checkout('r-sold', 3, a[2].ticket)
    expect([late.statusCode, errorOf(late).code]).toEqual([409, 'SOLD_OUT'])
    // Waiting and sold out: SOLD_OUT too (no point sending them back to poll).
    expect(errorOf(await checkout('r-sold', 4, a[3].ticket)).code).toBe('SOLD_OUT')
    // A unit comes back (an order cancelled): open again. User 3 still holds a live admission,
    // which fills floor(1.5 × 1) = 1, so the line waits, in its order.
    await redis.set(saleKeys('r-sold').stock, 1)
    expect((await poll(a[3].ticket)).json()).toMatchObject({ status: 'waiting', position: 1 })
    expect((await poll(a[2].ticket)).json().status).toBe('admitted')
    expect((await checkout('r-sold', 3, a[2].ticket)).statusCode).toBe(200)
  })

  it('drops places not polled for drop_after_seconds; the user may join again at the back', async () => {
    await putSale('r-drop', { stock: 0, waiting_room: ROOM })
    const a = (await join('r-drop', 'idle')).json()
    const b = (await join('r-drop', 'keen')).json()
    expect(b.position).toBe(2)
    await redis.zadd(roomKeys('r-drop').seen, Date.now() - 61_000, 'idle')
    expect((await poll(b.ticket)).json().position).toBe(1)
    expect((await poll(a.ticket)).json()).toMatchObject({ status: 'closed', reason: 'dropped' })
    const back = (await join('r-drop', 'idle')).json()
    expect(back).toMatchObject({ status: 'sold_out', position: 2 })
    const metric = await runtime.registry.getSingleMetricAsString('flash_sale_waiting_room_dropped_total')
    expect(metric).toMatch(/product_id="r-drop",reason="idle"} 1/)
  })

  it('puts back, from its ticket, a place Redis lost (a failover after the answer)', async () => {
    await putSale('r-lost', { stock: 0, waiting_room: ROOM })
    const t = []
    for (let u = 1; u <= 3; u++) t.push((await join('r-lost', u)).json())
    const k = roomKeys('r-lost')
    await redis.multi().hdel(k.users, '2').zrem(k.waiting, '2').zrem(k.seen, '2').exec()
    expect((await poll(t[2].ticket)).json().position).toBe(2)
    expect((await poll(t[1].ticket)).json()).toMatchObject({ ticket: t[1].ticket, position: 2 })
    expect((await poll(t[2].ticket)).json().position).toBe(3)
  })

  it('orders users who joined before the start by the published lottery, then by arrival', async () => {
    const startsAt = new Date(Date.now() + 4_000).toISOString()
    const put = await putSale('r-draw', {
      stock: 100,
      starts_at: startsAt,
      waiting_room: { ...ROOM, admit_per_second: 5 },
    })
    const users = Array.from({ length: 60 }, (_, i) => `user-${i}`)
    const tickets = new Map<string, string>()
    for (const u of users) tickets.set(u, (await join('r-draw', u)).json().ticket)
    const before = await app.inject({ method: 'GET', url: '/v1/sales/r-draw/queue/draw' })
    expect(before.json()).toMatchObject({
      secret: null,
      commitment_sha256: put.json().waiting_room.lottery_commitment,
    })
    const positions = new Map<string, number>()
    for (const u of users) {
      const a = (await poll(tickets.get(u)!)).json()
      expect(a).toMatchObject({ status: 'waiting', draw: 'pending' })
      positions.set(u, a.position)
    }
    await until(async () => Date.now() > Date.parse(startsAt), 'the opening', 10_000)
    const draw = (await app.inject({ method: 'GET', url: '/v1/sales/r-draw/queue/draw' })).json()
    expect(draw.commitment_ok).toBe(true)
    const expected = drawOrder(draw.secret, users)
    expect([...positions.entries()].sort((x, y) => x[1] - y[1]).map(([u]) => u)).toEqual(expected)
    const audit = await app.inject({
      method: 'GET',
      url: '/admin/sales/r-draw/queue/draw',
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(audit.json().entrants.map((e: { user_id: string }) => e.user_id)).toEqual(expected)
    expect((await app.inject({ method: 'GET', url: '/admin/sales/r-draw/queue/draw' })).statusCode).toBe(401)
    // After the start: the first in the draw go in first, and a late joiner is behind everyone.
    const late = (await join('r-draw', 'late')).json()
    expect(late).toMatchObject({ status: 'waiting', draw: 'done' })
    expect(late.position).toBe(late.waiting)
    await until(
      async () => (await poll(tickets.get(expected[0]!)!)).json().status === 'admitted',
      'the first in line admitted',
      10_000,
    )
    const admitted = await redis.zrange(roomKeys('r-draw').admitted, 0, -1)
    expect(admitted.length).toBeLessThan(users.length)
    expect(new Set(admitted)).toEqual(new Set(expected.slice(0, admitted.length)))
  })

  it('survives SCRIPT FLUSH (EVALSHA falls back to EVAL)', async () => {
    await putSale('r-flush', { waiting_room: ROOM })
    await redis.script('FLUSH')
    const a = (await join('r-flush', 1)).json()
    await redis.script('FLUSH')
    expect((await poll(a.ticket)).statusCode).toBe(200)
    await redis.script('FLUSH')
    expect((await checkout('r-flush', 1, a.ticket)).statusCode).toBe(200)
  })

  it.each([
    ['no body', undefined, 'body'],
    ['an array', [], 'body'],
    ['no user_id', {}, 'user_id'],
    ['a bad user_id', { user_id: 'a b' }, 'user_id'],
    ['a huge user_id', { user_id: 'x'.repeat(65) }, 'user_id'],
  ])('POST /v1/sales/:id/queue with %s → 400 naming %s', async (_name, payload, field) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/sales/r-one/queue',
      ...(payload === undefined ? {} : { payload }),
    })
    expect(res.statusCode).toBe(400)
    expect(errorOf(res)).toMatchObject({ code: 'INVALID_REQUEST', field })
    expect(errorOf(await join('a.b', 1)).field).toBe('product_id')
  })

  it('GET /v1/queue/ with no ticket, or any junk, is 403 (never 404 or 5xx)', async () => {
    for (const junk of ['', 'v1.', '%00', 'a/b/c', encodeURIComponent('é'.repeat(600)), 'v1.AAAA.BBBB']) {
      const res = await poll(junk)
      expect([res.statusCode, errorOf(res).code], junk.slice(0, 20)).toEqual([403, 'INVALID_TICKET'])
    }
  })

  it('serves the page with a strict CSP and nothing external', async () => {
    const res = await app.inject({ method: 'GET', url: '/queue/r-page' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toMatch(/^text\/html/)
    const csp = String(res.headers['content-security-policy'])
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("connect-src 'self'")
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/)
    expect(csp).not.toContain('unsafe-inline')
    expect(res.body).not.toMatch(/https?:\/\//)
    expect(res.body).not.toMatch(/<script[^>]+src=|<link[^>]+stylesheet/i)
    expect(res.body).toContain('<meta name="product-id" content="r-page">')
    expect((await app.inject({ method: 'GET', url: '/queue/%3Cscript%3E' })).statusCode).toBe(400)
  })
})
