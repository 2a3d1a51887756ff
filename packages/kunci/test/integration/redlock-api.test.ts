import { channel } from 'node:diagnostics_channel'
import type { Redis } from 'ioredis'
import {
  AcquireAbortedError,
  InvalidOptionError,
  type Lock,
  LockLostError,
  LockNotAcquiredError,
  LockUnavailableError,
  Redlock,
  type RedlockOptions,
} from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  commandStats,
  eventually,
  type Fixture,
  queuedOn,
  ready,
  sleep,
  startFixture,
  until,
} from '../support/nodes.js'

let fx: Fixture
let clients: Redis[]
const managers: Redlock[] = []

function redlock(extra: Partial<RedlockOptions> = {}, cs = clients): Redlock {
  const r = new Redlock({ clients: cs, quarantine: false, onWarning: () => {}, nodeTimeoutMs: 300, ...extra })
  managers.push(r)
  return r
}

let n = 0
const res = () => `api-${++n}-${Math.random().toString(36).slice(2)}`
const lockKey = (r: string) => `kunci:{${r}}`

async function valuesOf(key: string): Promise<(string | null)[]> {
  return Promise.all(clients.map((c) => c.get(key)))
}

beforeAll(async () => {
  fx = await startFixture({ count: 5 })
  clients = fx.clients()
  await ready(clients)
})
afterAll(async () => {
  for (const m of managers) await m.close()
  await fx?.stop()
})

describe('acquire and release', () => {
  it('grants on every node with a fencing token and releases on every node', async () => {
    const rl = redlock()
    const r = res()
    const t0 = performance.now()
    const lock = await rl.acquire(r, { ttlMs: 2000 })
    expect(lock.fence).toBeGreaterThan(0)
    // Validity counts from the attempt's start: ttl − drift minus at most the time spent since
    // t0 (on a loaded machine the acquire alone can take a good part of the TTL).
    const validity = lock.validityMs
    const elapsed = performance.now() - t0
    expect(validity).toBeGreaterThanOrEqual(2000 - 2000 * 0.01 - 2 - elapsed)
    expect(validity).toBeLessThanOrEqual(2000 - 2000 * 0.01 - 2)
    // acquire resolves once a majority granted; the other nodes follow (or time out).
    expect((await valuesOf(lockKey(r))).filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(3)
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => lock.token)))
    expect(lock.token).toMatch(/^[0-9a-f]{32}$/)
    await lock.release()
    expect(lock.state).toBe('released')
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => null)))
    await lock.release() // idempotent
  })

  it('gives successive holders strictly increasing fencing tokens, across managers', async () => {
    const a = redlock()
    const b = redlock({}, fx.clients())
    const r = res()
    const fences: number[] = []
    for (let i = 0; i < 10; i++) {
      const lock = await (i % 2 ? a : b).acquire(r, { ttlMs: 2000 })
      fences.push(lock.fence)
      await lock.release()
    }
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!)
  })

  it('hands the lock to a waiter of the same process in the release round trip', async () => {
    const rl = redlock()
    const r = res()
    const first = await rl.acquire(r, { ttlMs: 2000 })
    const second = rl.acquire(r, { ttlMs: 2000 })
    await sleep(20)
    await first.release()
    const lock = await second
    expect(lock.fence).toBeGreaterThan(first.fence)
    // The hand-over resolves once a majority ran it: those nodes hold the new token at once. A
    // straggler may still hold first's token (under load its answer comes later); it runs the
    // same hand-over and converges, never keeping first's token.
    expect((await valuesOf(lockKey(r))).filter((v) => v === lock.token).length).toBeGreaterThanOrEqual(3)
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => lock.token)))
    await lock.release()
  })

  it('reports contention as E_LOCK_NOT_ACQUIRED with per-node votes, after exactly one attempt when retryCount is 0', async () => {
    const holder = redlock()
    const other = redlock({}, fx.clients())
    const r = res()
    const lock = await holder.acquire(r, { ttlMs: 5000 })
    // The holder's acquire resolved on a majority; a straggler may run it later (its link
    // waits for the node's INFO check first). Count from after it has reached every node, so
    // only the contender's script calls are counted.
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => lock.token)))
    await Promise.all(clients.map((c) => c.config('RESETSTAT')))
    const err = await other.acquire(r, { retryCount: 0 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(LockNotAcquiredError)
    const e = err as LockNotAcquiredError
    expect(e.code).toBe('E_LOCK_NOT_ACQUIRED')
    expect(e.attempts).toBe(1)
    // Decided as soon as a majority said "held"; the others may still have been answering.
    const statuses = e.votes.map((v) => v.status)
    expect(statuses.filter((s) => s === 'held').length).toBeGreaterThanOrEqual(3)
    expect(
      statuses.every((s) => s === 'held' || s === 'pending'),
      JSON.stringify(e.votes),
    ).toBe(true)
    // One attempt is one script call per node. The nodes that were still 'pending' get theirs
    // after the decision, so wait for every node to count it (and never a second one).
    const calls = () => Promise.all(clients.map(async (c) => (await commandStats(c)).get('evalsha') ?? 0))
    await eventually(async () => expect(await calls()).toEqual(clients.map(() => 1)))
    await lock.release()
  })

  it('is all-or-nothing for several resources and leaves no partial grant', async () => {
    const rl = redlock()
    const other = redlock({}, fx.clients())
    const [a, b] = [res(), res()]
    const holdB = await other.acquire(b, { ttlMs: 5000 })
    await expect(rl.acquire([a, b], { retryCount: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError)
    // holdB resolved on a majority, so on a straggler (other's connections are new and wait for
    // the node's INFO check) our attempt can come first and be granted both. The attempt was
    // refused by a majority, which never had `a`; a node that answered with a grant was
    // released before the rejection, and one that answers later is released when its answer
    // arrives (docs/locks.md, "Partial-grant cleanup"): no node keeps `a`.
    expect((await valuesOf(lockKey(a))).filter((v) => v === null).length).toBeGreaterThanOrEqual(3)
    await eventually(async () => expect(await valuesOf(lockKey(a))).toEqual(clients.map(() => null)))
    await holdB.release()
    const both = await rl.acquire([a, b], { ttlMs: 2000 })
    // holdB's release resolved once a majority released it, so a slower node may still have
    // refused `both`: every node has both resources or neither (read in one MGET per node, so
    // no grant can fall between the two reads), and a majority has both.
    const pairs = await Promise.all(clients.map((c) => c.mget(lockKey(a), lockKey(b))))
    for (const [va, vb] of pairs) expect(va === both.token).toBe(vb === both.token)
    expect(pairs.filter(([va]) => va === both.token).length).toBeGreaterThanOrEqual(3)
    expect(pairs.every(([va]) => va === both.token || va === null)).toBe(true)
    await both.release()
    // Released on a majority at once, and on every node once the stragglers (and holdB's own
    // release where `both` was refused) have run.
    expect((await valuesOf(lockKey(b))).filter((v) => v === null).length).toBeGreaterThanOrEqual(3)
    await eventually(async () => {
      expect(await valuesOf(lockKey(a))).toEqual(clients.map(() => null))
      expect(await valuesOf(lockKey(b))).toEqual(clients.map(() => null))
    })
  })

  it('retries until the holder releases, woken by the release notification rather than the retry delay', async () => {
    const holder = redlock()
    const waiter = redlock({}, fx.clients())
    const r = res()
    const lock = await holder.acquire(r, { ttlMs: 10_000 })
    const t0 = performance.now()
    const p = waiter.acquire(r, { retryDelayMs: 5000, retryJitterMs: 0, retryCount: 3 })
    // Released only once the waiter's first attempt was refused (it queued on a majority).
    await until(async () => (await queuedOn(clients, `${lockKey(r)}:q`)) >= 3, 'the waiter to queue')
    await lock.release()
    const got = await p
    const waited = performance.now() - t0
    // Without the notification the second attempt would come after 5 s.
    expect(waited).toBeLessThan(1500)
    expect(got.fence).toBeGreaterThan(lock.fence)
    await got.release()
  })
})

describe('release, extend and loss', () => {
  it("release after expiry never deletes the next holder's key and says the lock was lost", async () => {
    const a = redlock()
    const b = redlock({}, fx.clients())
    const r = res()
    const old = await a.acquire(r, { ttlMs: 150 })
    await sleep(250)
    const next = await b.acquire(r, { ttlMs: 5000 })
    await expect(old.release()).rejects.toMatchObject({ code: 'E_LOCK_LOST' })
    expect(old.state).toBe('lost')
    // next was granted by a majority at least; the rest follow (other connections than ours).
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => next.token)))
    await next.release()
  })

  it('extend renews validity; extend after loss or release throws E_LOCK_LOST', async () => {
    const rl = redlock()
    const r = res()
    // Generous TTLs: the extension must not depend on how fast a loaded machine runs.
    const lock = await rl.acquire(r, { ttlMs: 5000 })
    await sleep(300)
    const before = lock.validityMs
    await lock.extend(20_000)
    expect(lock.isHeld).toBe(true)
    expect(lock.validityMs).toBeGreaterThan(before + 10_000)
    await eventually(async () =>
      expect((await Promise.all(clients.map((c) => c.pttl(lockKey(r))))).every((t) => t > 10_000)).toBe(true),
    )
    // Another holder overwrote the key on a majority (as if ours had expired meanwhile).
    await Promise.all(clients.slice(0, 3).map((c) => c.set(lockKey(r), 'someone-else', 'PX', 5000)))
    const err = await lock.extend().catch((e: unknown) => e)
    expect(err).toBeInstanceOf(LockLostError)
    expect(lock.state).toBe('lost')
    await expect(lock.extend()).rejects.toMatchObject({ code: 'E_LOCK_LOST' })
    expect(await clients[0]!.get(lockKey(r))).toBe('someone-else')
    await Promise.all(clients.map((c) => c.del(lockKey(r))))

    const l2 = await rl.acquire(res(), { ttlMs: 1000 })
    await l2.release()
    await expect(l2.extend()).rejects.toMatchObject({ code: 'E_LOCK_LOST' })
  })

  it('never returns a lock whose validity ran out while it was being granted', async () => {
    const rl = redlock({ nodeTimeoutMs: 800 })
    const r = res()
    for (const node of fx.set.nodes) node.proxy!.setLatency(150)
    try {
      const err = await rl.acquire(r, { ttlMs: 250, retryCount: 0 }).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(LockUnavailableError)
    } finally {
      for (const node of fx.set.nodes) node.proxy!.reset()
    }
    // The late grants were cleaned up (or expired): nothing of ours remains.
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => null)))
  })

  it('a tiny ttl fails cleanly at once instead of returning an expired lock', async () => {
    const rl = redlock()
    const err = await rl.acquire(res(), { ttlMs: 1 }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(InvalidOptionError)
    expect((err as InvalidOptionError).option).toBe('ttlMs')
  })
})

describe('cancellation', () => {
  it('an AbortSignal stops a waiting acquire at once and leaves no lock behind', async () => {
    const holder = redlock()
    const waiter = redlock({}, fx.clients())
    const r = res()
    // Held for the whole test, released at its end: a 5 s ttl ran out beside a CPU-bound process
    // while the queues were checked (the release then found the lock lost).
    const lock = await holder.acquire(r, { ttlMs: 60_000 })
    const ac = new AbortController()
    // The next retry is 20 s away: an abort answered well before it was answered by the signal,
    // whatever a loaded machine adds (500 ms against a 1 s retry failed beside a CPU-bound process).
    const p = waiter.acquire(r, { signal: ac.signal, retryCount: 5, retryDelayMs: 20_000 })
    await sleep(100)
    const t0 = performance.now()
    ac.abort(new Error('user went away'))
    const err = await p.catch((e: unknown) => e)
    expect(performance.now() - t0).toBeLessThan(10_000)
    expect(err).toBeInstanceOf(AcquireAbortedError)
    // It left the nodes' wait queues too, so no release will try to wake it.
    await eventually(async () =>
      expect(await Promise.all(clients.map((c) => c.zcard(`${lockKey(r)}:q`)))).toEqual(clients.map(() => 0)),
    )
    await lock.release()
    await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => null)))
  })

  it('an already-aborted signal rejects before touching Redis', async () => {
    const rl = redlock()
    await expect(rl.acquire(res(), { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'E_LOCK_ABORTED',
    })
  })

  it('aborting a waiter queued behind a holder of the same process removes it from the queue', async () => {
    const rl = redlock()
    const r = res()
    const lock = await rl.acquire(r, { ttlMs: 5000 })
    const ac = new AbortController()
    const p = rl.acquire(r, { signal: ac.signal })
    const third = rl.acquire(r)
    ac.abort()
    await expect(p).rejects.toBeInstanceOf(AcquireAbortedError)
    await lock.release()
    const l3 = await third
    expect(l3.fence).toBeGreaterThan(lock.fence)
    await l3.release()
  })
})

describe('using()', () => {
  it('extends automatically while fn runs past the ttl, then releases', async () => {
    const rl = redlock()
    const r = res()
    let seen: Lock | undefined
    // ttl 1 s, held 2.5 s: several background extensions, each 800 ms before the validity ends
    // (not the default half ttl): slack for a loaded machine.
    const result = await rl.using(r, { ttlMs: 1000, extendBeforeMs: 800 }, async (signal, lock) => {
      seen = lock
      await sleep(2500)
      expect(signal.aborted).toBe(false)
      expect(lock.isHeld).toBe(true)
      return 42
    })
    expect(result).toBe(42)
    expect(seen!.state).toBe('released')
    expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => null))
  })

  it("aborts the signal with E_LOCK_LOST when the lock is taken away, and fn's result still wins", async () => {
    const rl = redlock()
    const r = res()
    let reason: unknown
    const result = await rl.using(r, { ttlMs: 300 }, async (signal, lock) => {
      // The acquire resolved on a majority; let it reach every node first, or a straggler's
      // acquire would find the thief's key and mark it as a waiter does (a "!" at offset 32).
      await eventually(async () => expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => lock.token)))
      await Promise.all(clients.map((c) => c.set(lockKey(r), 'thief', 'PX', 5000)))
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      reason = signal.reason
      return 'done'
    })
    expect(result).toBe('done')
    expect((reason as LockLostError).code).toBe('E_LOCK_LOST')
    expect(await clients[0]!.get(lockKey(r))).toBe('thief')
    await Promise.all(clients.map((c) => c.del(lockKey(r))))
  })

  it("fn's error is not hidden by a failing release", async () => {
    const rl = redlock()
    const r = res()
    const boom = new Error('boom')
    await expect(
      rl.using(r, { ttlMs: 1000 }, async () => {
        await Promise.all(clients.map((c) => c.del(lockKey(r))))
        throw boom
      }),
    ).rejects.toBe(boom)
  })

  it('stops extending at maxHoldMs and aborts with E_LOCK_MAX_HOLD', async () => {
    const rl = redlock()
    let reason: unknown
    let extended = 0
    const onExtended = () => extended++
    channel('kunci:lock:extended').subscribe(onExtended)
    const t0 = performance.now()
    try {
      // One extension, at ~0.5 s with 500 ms to spare (a 200 ms ttl left 100 ms, which a loaded
      // machine overran: the lock was lost instead); a second would hold past maxHoldMs.
      await rl.using(res(), { ttlMs: 1000, maxHoldMs: 1200 }, async (signal) => {
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        reason = signal.reason
      })
    } finally {
      channel('kunci:lock:extended').unsubscribe(onExtended)
    }
    expect((reason as { code: string }).code).toBe('E_LOCK_MAX_HOLD')
    // Extended while under maxHoldMs, then stopped at it, not before.
    expect(extended).toBe(1)
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1200)
  })

  it('await using releases at the end of the block', async () => {
    const rl = redlock()
    const r = res()
    {
      await using lock = await rl.acquire(r, { ttlMs: 2000 })
      expect(lock.isHeld).toBe(true)
    }
    expect(await valuesOf(lockKey(r))).toEqual(clients.map(() => null))
  })
})

describe('scripts and observability', () => {
  it('keeps working after SCRIPT FLUSH (EVALSHA falls back to EVAL)', async () => {
    const rl = redlock()
    await Promise.all(clients.map((c) => c.script('FLUSH')))
    const lock = await rl.acquire(res(), { ttlMs: 1000 })
    await lock.extend()
    await lock.release()
    expect(lock.state).toBe('released')
  })

  it('publishes acquire, contention and release events on diagnostics channels', async () => {
    const seen: string[] = []
    const subs = ['kunci:lock:acquired', 'kunci:lock:contention', 'kunci:lock:released'].map((name) => {
      const fn = () => seen.push(name)
      channel(name).subscribe(fn)
      return () => channel(name).unsubscribe(fn)
    })
    try {
      const a = redlock()
      const b = redlock({}, fx.clients())
      const r = res()
      const lock = await a.acquire(r, { ttlMs: 2000 })
      const p = b.acquire(r, { retryDelayMs: 50 })
      // b's first attempt found the lock held on a majority (it queued there): not a fixed
      // sleep, which a loaded machine can outlast before b's new connections are even checked.
      await until(async () => (await queuedOn(clients, `${lockKey(r)}:q`)) >= 3, 'b to queue')
      await lock.release()
      await (await p).release()
    } finally {
      for (const off of subs) off()
    }
    expect(seen).toContain('kunci:lock:acquired')
    expect(seen).toContain('kunci:lock:contention')
    expect(seen.filter((s) => s === 'kunci:lock:released').length).toBeGreaterThanOrEqual(2)
  })
})
