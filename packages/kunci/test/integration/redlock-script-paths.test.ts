/**
 * A request alone in its tick runs the lean single-resource scripts (acquire-one.lua,
 * release-one.lua, with bare-integer replies); requests that share a tick are packed into the
 * batched scripts. Both paths must decide alike: granted, held (with its TTL), fenced.
 */
import type { Redis } from 'ioredis'
import { LockNotAcquiredError, Redlock } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { commandStats, type Fixture, ready, startFixture, until } from '../support/nodes.js'

let fx: Fixture
let clients: Redis[]
let rl: Redlock
beforeAll(async () => {
  fx = await startFixture({ count: 3, proxy: false })
  clients = fx.clients()
  await ready(clients)
  rl = new Redlock({ clients: fx.clients(), quarantine: false, onWarning: () => {} })
})
afterAll(async () => {
  await rl?.close()
  await fx?.stop()
})

const far = () => (Date.now() + 3_600_000) * 1000 // a fence an hour ahead of our clock
let n = 0
const res = (tag: string) => `paths-${tag}-${++n}`

describe('lean and batched script paths', () => {
  it('alone: grants, reports a holder, and re-proposes above a higher stored fence', async () => {
    const free = res('free')
    const lock = await rl.acquire(free, { ttlMs: 5000 })
    expect(await Promise.all(clients.map((c) => c.get(`kunci:{${free}}`)))).toContain(lock.token)
    await lock.release()
    // Released on a quorum at once, on the last node when it answers.
    await until(
      async () => (await Promise.all(clients.map((c) => c.exists(`kunci:{${free}}`)))).every((x) => x === 0),
      'the lock to be gone from every node',
    )

    const fenced = res('fenced')
    const stored = far()
    await Promise.all(clients.map((c) => c.set(`kunci:{${fenced}}:fence`, String(stored))))
    const f = await rl.acquire(fenced, { ttlMs: 5000, retryCount: 0 })
    expect(f.fence).toBeGreaterThan(stored)
    await f.release()

    const held = res('held')
    // Another manager's holder: a kunci token (32 lowercase hex characters), which waiters mark.
    const holder = 'ab'.repeat(16)
    await Promise.all(clients.map((c) => c.set(`kunci:{${held}}`, holder, 'PX', 60_000)))
    const t0 = performance.now()
    await expect(rl.acquire(held, { retryCount: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError)
    expect(performance.now() - t0).toBeLessThan(5000)
    // A caller that will wait queues and marks the lock on every node.
    const waiting = rl.acquire(held, { retryCount: 1, retryDelayMs: 50, retryJitterMs: 0 })
    await expect(waiting).rejects.toBeInstanceOf(LockNotAcquiredError)
    await until(
      async () =>
        (await Promise.all(clients.map((c) => c.get(`kunci:{${held}}`)))).every((v) => v === `${holder}!`),
      'the waiter to mark the lock on every node',
    )
  })

  it('together: one script call per node for a tick, with the same decisions', async () => {
    const free = Array.from({ length: 20 }, () => res('b-free'))
    const fenced = Array.from({ length: 5 }, () => res('b-fenced'))
    const held = Array.from({ length: 5 }, () => res('b-held'))
    const stored = far()
    await Promise.all(
      clients.flatMap((c) => [
        ...fenced.map((r) => c.set(`kunci:{${r}}:fence`, String(stored))),
        ...held.map((r) => c.set(`kunci:{${r}}`, 'cd'.repeat(16), 'PX', 60_000)),
      ]),
    )
    await clients[0]!.config('RESETSTAT')
    const results = await Promise.allSettled([
      ...free.map((r) => rl.acquire(r, { ttlMs: 5000, retryCount: 0 })),
      ...fenced.map((r) => rl.acquire(r, { ttlMs: 5000, retryCount: 0 })),
      ...held.map((r) => rl.acquire(r, { ttlMs: 5000, retryCount: 0 })),
    ])
    // 30 acquisitions (+ re-proposals for the fenced ones) in a handful of script calls.
    expect((await commandStats(clients[0]!)).get('evalsha') ?? 0).toBeLessThan(10)
    const ok = results.slice(0, 25).map((r) => (r.status === 'fulfilled' ? r.value : undefined))
    expect(ok.every((l) => l !== undefined)).toBe(true)
    for (const l of ok.slice(20)) expect(l!.fence).toBeGreaterThan(stored)
    for (const r of results.slice(25)) {
      expect(r.status).toBe('rejected')
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(LockNotAcquiredError)
    }
    await Promise.all(ok.map((l) => l!.release()))
    const keys = [...free, ...fenced].map((r) => `kunci:{${r}}`)
    await until(
      async () => (await Promise.all(clients.map((c) => c.exists(...keys)))).every((x) => x === 0),
      'every lock to be gone from every node',
    )
  })

  it("alone: each node's request is written within the acquire() call; a crowd of one tick still shares a call", async () => {
    // At concurrency 1 a link whose last call carried one request writes the tick's first request
    // at once (node-link.ts), instead of after the whole attempt is built and a microtask.
    const own = fx.clients()
    await ready(own)
    const writes: string[][] = own.map(() => [])
    own.forEach((c, i) => {
      const original = c.sendCommand.bind(c)
      c.sendCommand = ((command: { name: string }, stream?: unknown) => {
        writes[i]!.push(command.name)
        return original(command as never, stream as never)
      }) as typeof c.sendCommand
    })
    const lone = new Redlock({ clients: own, quarantine: false, onWarning: () => {} })
    try {
      // The first calls after start-up go through the tick's flush; from then on they are lone.
      for (let i = 0; i < 2; i++) await (await lone.acquire(res('warm'), { ttlMs: 5000 })).release()
      for (const w of writes) w.length = 0
      const pending = lone.acquire(res('lone'), { ttlMs: 5000 })
      // Nothing has run but acquire()'s synchronous part: every node already has its request.
      expect(writes.map((w) => w.filter((n) => n === 'evalsha').length)).toEqual(own.map(() => 1))
      const lock = await pending
      for (const w of writes) w.length = 0
      const released = lock.release()
      expect(writes.map((w) => w.filter((n) => n === 'evalsha').length)).toEqual(own.map(() => 1))
      await released

      // Twenty acquisitions in one tick: the first goes at once, the other nineteen in one call.
      for (const w of writes) w.length = 0
      const crowd = await Promise.all(
        Array.from({ length: 20 }, () => lone.acquire(res('crowd'), { ttlMs: 5000 })),
      )
      for (const w of writes) expect(w.filter((n) => n === 'evalsha').length).toBe(2)
      await Promise.all(crowd.map((l) => l.release()))
    } finally {
      await lone.close()
      for (const c of own) c.disconnect()
    }
  })

  it('auto-pipelining clients: sent directly, with their keyPrefix, and EVAL after SCRIPT FLUSH', async () => {
    // The lock path batches a tick itself and sends around ioredis' auto-pipeline (lua-script.ts):
    // the command must still carry the client's keyPrefix and fall back to EVAL on NOSCRIPT.
    const piped = fx.clients({ enableAutoPipelining: true, keyPrefix: 'app:' })
    await ready(piped)
    const sent: { name: string; viaPipeline: boolean }[] = []
    for (const c of piped) {
      const original = c.sendCommand.bind(c)
      c.sendCommand = ((command: { name: string }, stream?: unknown) => {
        sent.push({ name: command.name, viaPipeline: stream !== undefined })
        return original(command as never, stream as never)
      }) as typeof c.sendCommand
    }
    const prl = new Redlock({ clients: piped, quarantine: false, onWarning: () => {} })
    try {
      const r = res('piped')
      const lock = await prl.acquire(r, { ttlMs: 5000 })
      const held = await Promise.all(clients.map((c) => c.get(`app:kunci:{${r}}`)))
      expect(held.filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(2)
      await lock.release()
      const scripts = sent.filter((s) => s.name === 'evalsha')
      expect(scripts.length).toBeGreaterThanOrEqual(piped.length * 2)
      expect(scripts.filter((s) => s.viaPipeline)).toEqual([])

      await Promise.all(clients.map((c) => c.script('FLUSH')))
      const again = await prl.acquire(r, { ttlMs: 5000 })
      expect(again.fence).toBeGreaterThan(lock.fence)
      expect(sent.some((s) => s.name === 'eval')).toBe(true)
      await again.release()
      await until(
        async () =>
          (await Promise.all(clients.map((c) => c.exists(`app:kunci:{${r}}`)))).every((x) => x === 0),
        'the prefixed lock to be gone from every node',
      )
    } finally {
      await prl.close()
      for (const c of piped) c.disconnect()
    }
  })
})
