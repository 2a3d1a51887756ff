/**
 * The waiting room on the whole local stack, all real: 2 service processes on one port, a 3+3
 * Redis Cluster, PostgreSQL, a worker. The draw and the admission rate, sold out within a
 * second, forged tickets over HTTP, and a real page in headless Chromium that joins, waits, is
 * admitted and buys. The page's screenshots go to artifacts/; with FS_UPDATE_DOCS_IMG=1 the
 * composite also replaces docs/img/waiting-room.png.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Cluster } from 'ioredis'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { drawOrder, lotteryCommitment } from '../../src/waiting-room/lottery.js'
import { roomKeys } from '../../src/waiting-room/room-keys.js'
import { TicketSigner } from '../../src/waiting-room/ticket.js'
import { useStack } from '../support/stack-fixture.js'
import {
  type Answer,
  adminRedis,
  mapLimit,
  metricSum,
  putRoomSale,
  RoomClient,
  until,
} from '../support/waiting-room.js'

const CHROMIUM = '/usr/bin/chromium'
const ARTIFACTS = new URL('../../../../artifacts/', import.meta.url)
const DOCS_IMG = new URL('../../../../docs/img/waiting-room.png', import.meta.url)

describe('waiting room on the local stack', () => {
  const fx = useStack({ strategy: 'lua', instances: 2, lockNodes: false }, { db: 'fs_room_stack' })
  let client: RoomClient
  let redis: Cluster

  beforeAll(() => {
    client = new RoomClient(fx.stack.url, 48)
    redis = adminRedis(fx.stack)
  })
  afterAll(async () => {
    await client?.close()
    redis?.disconnect()
  })

  it('2,000 users join before the start from both instances, with repeats: positions are a permutation in the order of the published lottery; admission then holds its rate within 10 % over 10 s', async () => {
    const RATE = 150
    const startsAtMs = Date.now() + 25_000
    const put = await putRoomSale(fx.stack, 'wr-draw', {
      stock: 100_000,
      starts_at: new Date(startsAtMs).toISOString(),
      waiting_room: { admit_per_second: RATE, max_admitted: 100_000, admission_seconds: 600 },
    })
    const users = Array.from({ length: 2_000 }, (_, i) => `u${i + 1}`)
    // Every user once, 600 repeats (other tabs, retries), in random order.
    const calls = [...users, ...Array.from({ length: 600 }, () => users[Math.floor(Math.random() * 2_000)]!)]
    calls.sort(() => Math.random() - 0.5)
    const joins = await mapLimit(calls, 48, (u) => client.join('wr-draw', u))
    expect(joins.filter((j) => j.status !== 200)).toEqual([])
    const ticket = new Map<string, string>()
    for (const [i, j] of joins.entries()) {
      const u = calls[i]!
      expect(j.body).toMatchObject({ status: 'waiting', draw: 'pending', user_id: u })
      // Joining again returns the same ticket: no second place.
      if (ticket.has(u)) expect(j.body.ticket).toBe(ticket.get(u))
      ticket.set(u, j.body.ticket!)
    }
    const polls = await mapLimit(users, 48, (u) => client.poll(ticket.get(u)!))
    expect(Date.now(), 'joining and polling must finish before the start').toBeLessThan(startsAtMs)
    const position = new Map<string, number>()
    for (const [i, p] of polls.entries()) {
      expect(p.body).toMatchObject({ status: 'waiting', draw: 'pending', waiting: 2_000 })
      position.set(users[i]!, p.body.position!)
    }
    // A permutation of 1..2000: no duplicate, no gap.
    expect([...position.values()].sort((a, b) => a - b)).toEqual(users.map((_, i) => i + 1))

    // The secret stays hidden until the start, then anyone can check the draw with it.
    const hidden = await (await fetch(`${fx.stack.url}/v1/sales/wr-draw/queue/draw`)).json()
    expect(hidden).toMatchObject({ secret: null, commitment_sha256: put.waiting_room!.lottery_commitment })
    await until('the start', async () => (Date.now() > startsAtMs + 50 ? true : undefined))
    const draw = (await (await fetch(`${fx.stack.url}/v1/sales/wr-draw/queue/draw`)).json()) as {
      secret: string
    }
    expect(lotteryCommitment(draw.secret)).toBe(put.waiting_room!.lottery_commitment)
    const expected = drawOrder(draw.secret, users)
    expect([...position.entries()].sort((a, b) => a[1] - b[1]).map(([u]) => u)).toEqual(expected)

    // The rate: pages poll (here 16 lanes over random users) and every poll advances the room.
    let driving = true
    const answers: Answer[] = []
    const lanes = Array.from({ length: 16 }, async () => {
      while (driving) {
        const a = await client.poll(ticket.get(users[Math.floor(Math.random() * users.length)]!)!)
        answers.push(a)
        await sleep(10)
      }
    })
    const sample = async () => {
      const [count] = await redis.hmget(roomKeys('wr-draw').room, 'admitted_total')
      return { at: performance.now(), count: Number(count) }
    }
    await sleep(Math.max(0, startsAtMs + 1_500 - Date.now()))
    const a = await sample()
    await sleep(10_000)
    const b = await sample()
    driving = false
    await Promise.all(lanes)
    const measured = (b.count - a.count) / ((b.at - a.at) / 1_000)
    console.info(
      `[waiting-room] admitted ${b.count - a.count} in ${((b.at - a.at) / 1_000).toFixed(2)} s: ${measured.toFixed(1)}/s for ${RATE}/s`,
    )
    expect(measured).toBeGreaterThan(RATE * 0.9)
    expect(measured).toBeLessThan(RATE * 1.1)
    // The ETA's rate is the measured one, and it agrees.
    const late = answers.filter((x) => x.status === 200 && x.at > a.at + 5_000)
    expect(late.length).toBeGreaterThan(50)
    for (const x of late) {
      expect(x.body.admit_rate).toBeGreaterThan(RATE * 0.85)
      expect(x.body.admit_rate).toBeLessThan(RATE * 1.15)
      if (x.body.status === 'waiting') {
        expect(Math.abs(x.body.eta_seconds! - x.body.position! / x.body.admit_rate)).toBeLessThan(1.5)
      }
    }
    // Admitted in the draw's order: the admitted users are its first ones, admitted in turn
    // (the score is the admission's end, the same for users admitted by one poll).
    const flat = await redis.zrange(roomKeys('wr-draw').admitted, 0, -1, 'WITHSCORES')
    const admittedAt = new Map<string, number>()
    for (let i = 0; i < flat.length; i += 2) admittedAt.set(flat[i]!, Number(flat[i + 1]))
    const admitted = [...admittedAt.keys()]
    expect(admitted.length).toBeGreaterThan(1_500)
    expect(new Set(admitted)).toEqual(new Set(expected.slice(0, admitted.length)))
    const inDrawOrder = expected.slice(0, admitted.length).map((u) => admittedAt.get(u)!)
    expect(inDrawOrder).toEqual([...inDrawOrder].sort((x, y) => x - y))
    const served = await metricSum(fx.stack.metricsUrl!, 'flash_sale_waiting_room_admitted_total', {
      product_id: 'wr-draw',
    })
    expect(served).toBeGreaterThanOrEqual(admitted.length)
  }, 120_000)

  it('stock runs out: every waiting user sees sold_out within 1 s; an admitted ticket then gets SOLD_OUT; units coming back reopen the line', async () => {
    // k = 2 and 30 units: 60 admitted at once, 200 wait.
    await putRoomSale(fx.stack, 'wr-sold', {
      stock: 30,
      waiting_room: { admit_per_second: 1_000, max_admitted: 1_000, admission_seconds: 300, stock_factor: 2 },
    })
    // An idle room fills its bucket (one second's worth): the first 60 are let in as they join.
    await sleep(200)
    const users = Array.from({ length: 260 }, (_, i) => `s${i + 1}`)
    const joins = await mapLimit(users, 16, (u) => client.join('wr-sold', u))
    const admitted = joins.filter((j) => j.body.status === 'admitted')
    const waiting = joins.filter((j) => j.body.status === 'waiting')
    expect([admitted.length, waiting.length]).toEqual([60, 200])

    // The waiting users' pages poll every 0.4–0.6 s while the admitted ones buy, all at once.
    let polling = true
    const seen = new Map<string, Answer[]>()
    const pollers = waiting.map(async (w) => {
      const list: Answer[] = []
      seen.set(w.body.user_id, list)
      while (polling) {
        list.push(await client.poll(w.body.ticket!))
        await sleep(400 + Math.random() * 200)
      }
    })
    await sleep(1_000)
    const buys = await mapLimit(admitted, 60, (j) =>
      client.checkout('wr-sold', j.body.user_id, j.body.ticket!, `buy-${j.body.user_id}`),
    )
    const sold = buys.filter((b) => b.status === 200)
    expect(sold).toHaveLength(30)
    // Admitted but too late: SOLD_OUT, the reservation's own answer.
    expect(buys.filter((b) => b.status === 409).map((b) => b.body.error?.code)).toEqual(
      Array(30).fill('SOLD_OUT'),
    )
    const soldOutAt = Math.max(...sold.map((b) => b.at))
    await sleep(1_500)
    polling = false
    await Promise.all(pollers)
    const lags: number[] = []
    for (const [user, list] of seen) {
      expect(
        list.every((x) => x.status === 200),
        user,
      ).toBe(true)
      // Nobody waiting was ever admitted: k × the units left never made room.
      expect(
        list.some((x) => x.body.status === 'admitted'),
        user,
      ).toBe(false)
      // Every poll sent after the last unit went says sold_out…
      for (const x of list.filter((y) => y.sentAt > soldOutAt)) expect(x.body.status, user).toBe('sold_out')
      // …and each user saw it within a second.
      const first = list.find((x) => x.body.status === 'sold_out')
      expect(first, user).toBeDefined()
      lags.push(first!.at - soldOutAt)
    }
    const worst = Math.max(...lags)
    console.info(
      `[waiting-room] sold_out seen by all 200 waiting users at most ${worst.toFixed(0)} ms after the last unit`,
    )
    expect(worst).toBeLessThan(1_000)
    // A checkout with an admitted ticket of one who did not buy: SOLD_OUT.
    const lateUser = admitted[buys.findIndex((b) => b.status === 409)]!
    const again = await client.checkout('wr-sold', lateUser.body.user_id, lateUser.body.ticket!)
    expect([again.status, again.body.error?.code]).toEqual([409, 'SOLD_OUT'])

    // Two units come back (an order cancelled): the line reopens, places kept. 30 unbought
    // admissions still exceed k × 2, so nobody new is let in yet.
    const lastPosition = new Map([...seen].map(([u, list]) => [u, list.at(-1)!.body.position]))
    await redis.set(roomKeys('wr-sold').stock, 2)
    const back = await mapLimit(waiting.slice(0, 20), 10, (w) => client.poll(w.body.ticket!))
    for (const x of back) {
      expect(x.body.status).toBe('waiting')
      expect(x.body.position).toBe(lastPosition.get(x.body.user_id))
    }
  }, 120_000)

  it('forged tickets (wrong signature, another user’s, another sale’s, expired, truncated, 10 kB) → 403 INVALID_TICKET, never a 5xx, nothing reserved', async () => {
    await putRoomSale(fx.stack, 'wr-forge', {
      stock: 10,
      waiting_room: { admit_per_second: 100, max_admitted: 10, admission_seconds: 10 },
    })
    await sleep(100) // a second's worth of admissions accrues in the idle room
    const me = (await client.join('wr-forge', 'alice')).body
    const other = (await client.join('wr-forge', 'bob')).body
    const otherSale = (await client.join('wr-sold', 'alice')).body
    expect(me.status).toBe('admitted')
    const [v, payload, mac] = me.ticket!.split('.') as [string, string, string]
    const forgedPayload = Buffer.from(
      Buffer.from(payload, 'base64url').toString().replace('alice', 'mallory'),
    ).toString('base64url')
    const cases: [string, string, string][] = [
      ['signed with another key', new TicketSigner('x'.repeat(40)).sign(claimsOf(me.ticket!)), 'signature'],
      ['claims changed, MAC kept', `${v}.${forgedPayload}.${mac}`, 'signature'],
      ['another user’s', other.ticket!, 'user'],
      ['another sale’s', otherSale.ticket!, 'sale'],
      ['truncated', me.ticket!.slice(0, me.ticket!.length - 5), 'malformed'],
      ['10 kB', `v1.${'A'.repeat(10_240)}.${mac}`, 'malformed'],
    ]
    for (const [name, t, reason] of cases) {
      const res = await client.checkout('wr-forge', 'alice', t)
      expect([res.status, res.body.error?.code, res.body.error?.reason], name).toEqual([
        403,
        'INVALID_TICKET',
        reason,
      ])
      const polled = await client.poll(t)
      expect(polled.status, name).toBeLessThan(500)
      if (reason !== 'user' && reason !== 'sale') expect(polled.status, name).toBe(403)
    }
    // Expired: the admission lasts admission_seconds (10 s).
    await until('the admission to lapse', async () =>
      Date.now() > Date.parse(me.admitted_until!) + 100 ? true : undefined,
    )
    const lapsed = await client.checkout('wr-forge', 'alice', me.ticket!)
    expect([lapsed.status, lapsed.body.error?.reason]).toEqual([403, 'expired'])
    // Nothing reserved: the reservation lives in Redis (the stock and the buyers the script writes).
    expect(await redis.get(roomKeys('wr-forge').stock)).toBe('10')
    expect(await redis.hlen(roomKeys('wr-forge').buyers)).toBe(0)
    expect(
      await metricSum(fx.stack.metricsUrl!, 'flash_sale_waiting_room_refusals_total', {
        code: 'INVALID_TICKET',
      }),
    ).toBeGreaterThanOrEqual(cases.length + 1)
  }, 60_000)

  describe('in headless Chromium', () => {
    let browser: Browser
    beforeAll(async () => {
      expect(existsSync(CHROMIUM), 'chromium missing: node scripts/ensure-tools.mjs chromium').toBe(true)
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      })
    })
    afterAll(async () => {
      await browser?.close()
    })

    it('a page on a phone-sized screen joins, waits its turn, is admitted and buys', async () => {
      await putRoomSale(fx.stack, 'wr-page', {
        stock: 5,
        name: 'Batik shirt, limited run',
        waiting_room: { admit_per_second: 0.5, max_admitted: 100, admission_seconds: 120 },
      })
      // Three people ahead: at 0.5 admissions a second the page waits its turn for a few seconds.
      for (const u of ['ahead-1', 'ahead-2', 'ahead-3'])
        expect((await client.join('wr-page', u)).status).toBe(200)

      const page = await browser.newPage({
        viewport: { width: 390, height: 844 },
        deviceScaleFactor: 2,
        isMobile: true,
        hasTouch: true,
      })
      const problems: string[] = []
      const origins = new Set<string>()
      page.on('console', (m) => (m.type() === 'error' || m.type() === 'warning') && problems.push(m.text()))
      page.on('pageerror', (e) => problems.push(e.message))
      page.on('request', (r) => origins.add(new URL(r.url()).origin))
      const res = await page.goto(`${fx.stack.url}/queue/wr-page`)
      expect(res?.status()).toBe(200)
      expect(res?.headers()['content-security-policy']).toContain("default-src 'none'")
      await page.locator('#product-info').filter({ hasText: 'left' }).waitFor()
      expect(await page.locator('h1').textContent()).toBe('Batik shirt, limited run')

      await page.getByLabel('Your customer number').fill('shopper-7')
      await page.getByRole('button', { name: 'Join the line' }).click()
      await page.waitForSelector('body[data-state="waiting"]', { timeout: 15_000 })
      const status = page.getByRole('status')
      expect(await status.textContent()).toMatch(/You are in line: number \d/)
      expect(Number(await page.locator('#fig-position').textContent())).toBeGreaterThanOrEqual(1)
      expect(await page.locator('#fig-wait').textContent()).toMatch(/seconds|\d+ s|min/)
      // Nothing to press while waiting.
      expect(await page.getByRole('button', { name: 'Buy now' }).isVisible()).toBe(false)
      expect(await page.getByRole('button', { name: 'Join the line again' }).isVisible()).toBe(false)
      const shots = [await page.screenshot({ fullPage: true })]

      await page.waitForSelector('body[data-state="admitted"]', { timeout: 60_000 })
      expect(await status.textContent()).toContain('It is your turn')
      await page.locator('#countdown').filter({ hasText: 'Time left to buy' }).waitFor()
      const buy = page.getByRole('button', { name: 'Buy now' })
      expect(await buy.isVisible()).toBe(true)
      shots.push(await page.screenshot({ fullPage: true }))

      await buy.tap()
      await page.waitForSelector('body[data-state="bought"]', { timeout: 30_000 })
      expect(await status.textContent()).toContain('You bought it!')
      expect(await buy.isVisible()).toBe(false)
      await page.locator('#product-info').filter({ hasText: '4 left' }).waitFor()
      const resultText = (await page.locator('#result').textContent()) ?? ''
      const orderId = /Order number: (\S+)/.exec(resultText)?.[1]
      expect(orderId).toMatch(/^wr-page\./)
      const order = await (await fetch(`${fx.stack.url}/v1/orders/${orderId}`)).json()
      expect(order).toMatchObject({ order_id: orderId, user_id: 'shopper-7', product_id: 'wr-page' })
      expect(await page.locator('#steps li').count()).toBeGreaterThanOrEqual(3)
      shots.push(await page.screenshot({ fullPage: true }))

      // A reload keeps the place and shows the outcome, not a second purchase.
      await page.reload()
      await page.waitForSelector('body[data-state="bought"]', { timeout: 15_000 })
      expect(await status.textContent()).toContain('You have bought this product')

      expect(problems).toEqual([])
      expect([...origins]).toEqual([new URL(fx.stack.url).origin])
      await page.close()

      // One image of the three steps side by side, for the docs.
      const composite = await browser.newPage({ viewport: { width: 1290, height: 900 } })
      const figure = (png: Buffer, caption: string) =>
        `<figure><figcaption>${caption}</figcaption><img src="data:image/png;base64,${png.toString('base64')}"></figure>`
      await composite.setContent(
        `<!doctype html><style>body{margin:0;padding:20px;background:#e9ecf1;font:600 18px system-ui,sans-serif;display:flex;gap:20px;align-items:flex-start}
        figure{margin:0;width:390px}figcaption{margin:0 0 8px;color:#16181d}img{width:390px;border-radius:12px;box-shadow:0 2px 10px rgba(0,0,0,.15)}</style>
        ${figure(shots[0]!, '1. In line')}${figure(shots[1]!, '2. Your turn')}${figure(shots[2]!, '3. Bought')}`,
      )
      const png = await composite.screenshot({ fullPage: true })
      await composite.close()
      mkdirSync(ARTIFACTS, { recursive: true })
      writeFileSync(new URL('waiting-room.png', ARTIFACTS), png)
      if (process.env.FS_UPDATE_DOCS_IMG === '1') writeFileSync(DOCS_IMG, png)
    }, 120_000)
  })
})

function claimsOf(ticket: string) {
  const [productId, generation, userId, orderKey] = Buffer.from(ticket.split('.')[1]!, 'base64url')
    .toString()
    .split('|') as [string, string, string, string]
  return { productId, generation, userId, orderKey }
}
