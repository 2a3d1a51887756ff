import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../../src/config.js'
import {
  drawOrder,
  lotteryCommitment,
  lotteryRank,
  newLotterySecret,
} from '../../src/waiting-room/lottery.js'
import { configureKeys, gateKeys, roomKeys, visitKeys } from '../../src/waiting-room/room-keys.js'
import { DEFAULT_WAITING_ROOM, parseWaitingRoom } from '../../src/waiting-room/room-options.js'
import { ROOM_SCRIPTS } from '../../src/waiting-room/room-store.js'
import { MAX_TICKET_LENGTH, type TicketClaims, TicketSigner } from '../../src/waiting-room/ticket.js'

const SECRET = 'a-waiting-room-secret-of-32-chars!!'
const claims: TicketClaims = {
  productId: '9921',
  generation: '0123456789abcdef',
  userId: '4711',
  orderKey: '1764000000000123',
}

describe('TicketSigner', () => {
  const signer = new TicketSigner(SECRET)

  it('signs deterministically and verifies its own tickets', () => {
    const t = signer.sign(claims)
    expect(t).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/)
    expect(signer.sign({ ...claims })).toBe(t) // joining again gives the same string
    expect(signer.verify(t)).toEqual({ ok: true, claims })
    const long = { ...claims, productId: 'p'.repeat(64), userId: 'u'.repeat(64) }
    expect(signer.sign(long).length).toBeLessThan(MAX_TICKET_LENGTH)
    expect(signer.verify(signer.sign(long))).toEqual({ ok: true, claims: long })
  })

  it('refuses a secret under 32 characters and claims it would not sign', () => {
    expect(() => new TicketSigner('short')).toThrow(RangeError)
    expect(() => signer.sign({ ...claims, userId: 'a|b' })).toThrow(RangeError)
    expect(() => signer.sign({ ...claims, generation: 'xyz' })).toThrow(RangeError)
  })

  it('finds every forgery: another key, a changed claim, a flipped bit, a truncation, garbage', () => {
    const t = signer.sign(claims)
    const [, payload, mac] = t.split('.') as [string, string, string]
    const other = new TicketSigner('another-secret-another-secret-0123')
    expect(other.verify(t)).toEqual({ ok: false, reason: 'signature' })
    // The claims moved to another user / sale, keeping the MAC.
    for (const moved of [
      { ...claims, userId: '4712' },
      { ...claims, productId: '9922' },
      { ...claims, orderKey: '1' },
    ]) {
      const p = Buffer.from(
        `${moved.productId}|${moved.generation}|${moved.userId}|${moved.orderKey}`,
      ).toString('base64url')
      expect(signer.verify(`v1.${p}.${mac}`)).toEqual({ ok: false, reason: 'signature' })
    }
    const flipped = Buffer.from(mac, 'base64url')
    flipped[0] = flipped[0]! ^ 1
    expect(signer.verify(`v1.${payload}.${flipped.toString('base64url')}`)).toEqual({
      ok: false,
      reason: 'signature',
    })
    for (const bad of [
      t.slice(0, -1),
      t.slice(0, 20),
      `${t}x`,
      `v2.${payload}.${mac}`,
      `v1.${payload}`,
      `v1..${mac}`,
      '',
      'x'.repeat(10_240),
      `${t}.${t}`,
      t.replace('.', '%2E'),
      ' '.repeat(30),
    ]) {
      expect(signer.verify(bad).ok, bad.slice(0, 40)).toBe(false)
    }
    for (const notString of [undefined, null, 42, ['a'], { t }])
      expect(signer.verify(notString).ok).toBe(false)
  })

  it('accepts only the canonical spelling (no second string for one ticket)', () => {
    const t = signer.sign(claims)
    const [, payload, mac] = t.split('.') as [string, string, string]
    // 22 base64url characters carry 132 bits for a 128-bit MAC: the last one has 4 spare bits.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const last = alphabet.indexOf(mac.at(-1)!)
    const twin = `${mac.slice(0, -1)}${alphabet[last ^ 1]}`
    expect(Buffer.from(twin, 'base64url').equals(Buffer.from(mac, 'base64url'))).toBe(true)
    expect(signer.verify(`v1.${payload}.${twin}`)).toEqual({ ok: false, reason: 'malformed' })
  })
})

describe('parseWaitingRoom', () => {
  const ok = { admit_per_second: 200, max_admitted: 1_000, admission_seconds: 120 }
  const fieldOf = (v: unknown) => {
    try {
      parseWaitingRoom(v)
    } catch (err) {
      return (err as { details: { field: string } }).details.field
    }
    return undefined
  }

  it('is off when absent or null, and fills the documented defaults', () => {
    expect(parseWaitingRoom(undefined)).toBeUndefined()
    expect(parseWaitingRoom(null)).toBeUndefined()
    expect(parseWaitingRoom(ok)).toEqual({ ...ok, ...DEFAULT_WAITING_ROOM })
    expect(parseWaitingRoom({ ...ok, stock_factor: 1, drop_after_seconds: 30 })).toMatchObject({
      stock_factor: 1,
      drop_after_seconds: 30,
    })
  })

  it('names the field of every bad value', () => {
    expect(fieldOf(5)).toBe('waiting_room')
    expect(fieldOf([ok])).toBe('waiting_room')
    expect(fieldOf({ ...ok, admit_per_second: 0 })).toBe('waiting_room.admit_per_second')
    expect(fieldOf({ ...ok, admit_per_second: '200' })).toBe('waiting_room.admit_per_second')
    expect(fieldOf({ ...ok, max_admitted: 1.5 })).toBe('waiting_room.max_admitted')
    expect(fieldOf({ ...ok, admission_seconds: 5 })).toBe('waiting_room.admission_seconds')
    expect(fieldOf({ ...ok, stock_factor: 0.5 })).toBe('waiting_room.stock_factor')
    expect(fieldOf({ ...ok, drop_after_seconds: 10 })).toBe('waiting_room.drop_after_seconds')
    expect(fieldOf({ admit_per_second: 1, max_admitted: 1 })).toBe('waiting_room.admission_seconds')
    expect(fieldOf({ ...ok, admit_per_seconds: 3 })).toBe('waiting_room.admit_per_seconds')
    expect(fieldOf({ ...ok, admit_per_second: Number.POSITIVE_INFINITY })).toBe(
      'waiting_room.admit_per_second',
    )
  })
})

describe('the lottery and the scripts', () => {
  it('ranks below 2^48, the same for everyone, committed with SHA-256', () => {
    const { secret, commitment } = newLotterySecret()
    expect(secret).toMatch(/^[0-9a-f]{64}$/)
    expect(lotteryCommitment(secret)).toBe(commitment)
    const r = lotteryRank(secret, '4711')
    expect(r).toBe(lotteryRank(secret, '4711'))
    expect(r).toBeLessThan(2 ** 48)
    const users = Array.from({ length: 100 }, (_, i) => String(i + 1))
    const order = drawOrder(secret, users)
    expect([...order].sort()).toEqual([...users].sort())
    expect(order).not.toEqual(users)
  })

  it('each script header lists the KEYS the service passes, in that order', () => {
    const k = roomKeys('9921')
    const names = Object.fromEntries(Object.entries(k).map(([name, key]) => [key, name]))
    const header = (script: { source: string }) =>
      [...script.source.matchAll(/KEYS\[(\d+)\] ([\w ]+?) \(/g)].map((m) => m[2]!.replace('sale ', ''))
    expect(header(ROOM_SCRIPTS.visit)).toEqual(visitKeys(k).map((key) => names[key]))
    expect(header(ROOM_SCRIPTS.configure)).toEqual(configureKeys(k).map((key) => names[key]))
    expect(header(ROOM_SCRIPTS.gate)).toEqual(gateKeys(k).map((key) => names[key]))
    for (const key of Object.values(k)) expect(key.startsWith('{sale:9921}:')).toBe(true)
    // The page's script is sent as it is written: nothing a template literal would change.
    const page = readFileSync(new URL('../../src/waiting-room/page-script.ts', import.meta.url), 'utf8')
    const body = page.slice(page.indexOf('`') + 1, page.lastIndexOf('`'))
    expect(body).not.toMatch(/\\|\$\{|`|https?:/)
  })
})

describe('WAITING_ROOM_SECRET', () => {
  const base = {
    REDIS_URL: 'redis://10.0.0.1:6379',
    DATABASE_URL: 'postgres://app@db:5432/sale',
    ADMIN_TOKEN: 'a-long-enough-admin-token',
  }
  it('is optional (no room can be set up without it) and needs 32 characters when set', () => {
    expect(loadConfig(base).waitingRoomSecret).toBeUndefined()
    expect(loadConfig({ ...base, WAITING_ROOM_SECRET: SECRET }).waitingRoomSecret).toBe(SECRET)
    expect(() => loadConfig({ ...base, WAITING_ROOM_SECRET: 'short' })).toThrow(ConfigError)
    expect(() => loadConfig({ ...base, WAITING_ROOM_SECRET: 'short' })).toThrow(/WAITING_ROOM_SECRET/)
  })
})
