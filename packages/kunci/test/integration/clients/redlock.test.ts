/**
 * Redlock over three independent nodes, run once per supported client library (ioredis,
 * node-redis): the same flows, contention checked by the history checker, a node killed, and a
 * node restarted empty, which must sit out of the quorum (restart quarantine) with either client.
 */
import { channel } from 'node:diagnostics_channel'
import { type NodeSet, startNodes } from '@kunci/topology'
import { Redis } from 'ioredis'
import { type KunciClient, type Lock, Redlock, type RedlockOptions } from 'kunci'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { CLIENT_KINDS, type ClientKind } from '../../support/clients.js'
import { History } from '../../support/history.js'
import { queuedOn, until } from '../../support/nodes.js'

describe.each(CLIENT_KINDS)('Redlock with $name clients', ({ name, make }) => {
  let set: NodeSet
  let kind: ClientKind
  let probes: Redis[]
  const managers: Redlock[] = []
  const prefix = `cl-${name}:`

  beforeAll(async () => {
    set = await startNodes({ count: 3, proxy: false })
    kind = make()
    // Observers only: raw reads of what the nodes hold, whatever client is under test.
    probes = set.nodes.map((n) => new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 1 }))
    for (const p of probes) p.on('error', () => {})
  })
  afterAll(async () => {
    for (const m of managers.splice(0)) await m.close()
    await kind?.closeAll()
    for (const p of probes ?? []) p.disconnect()
    await set?.stop()
  })

  async function clients(offlineQueue = true): Promise<KunciClient[]> {
    return Promise.all(set.nodes.map((n) => kind.standalone(n, { offlineQueue })))
  }
  async function manager(o: Partial<RedlockOptions> = {}): Promise<Redlock> {
    const m = new Redlock({
      clients: await clients(),
      prefix,
      quarantine: false,
      nodeTimeoutMs: 500,
      onWarning: () => {},
      ...o,
    })
    managers.push(m)
    return m
  }
  /** What each node holds for `resource` (the first `upTo` nodes: a killed node is left out). */
  const holders = (resource: string, upTo = probes.length) =>
    Promise.all(probes.slice(0, upTo).map((p) => p.get(`${prefix}{${resource}}`)))

  it('acquires, extends, releases; using() extends on its own; a second manager waits its turn', async () => {
    const a = await manager()
    const b = await manager()
    const lock = await a.acquire('flow', { ttlMs: 1000 })
    expect(lock.isHeld).toBe(true)
    // A quorum holds it (the third node may have been slower than nodeTimeoutMs on a loaded machine).
    expect((await holders('flow')).filter((v) => v?.startsWith(lock.token)).length).toBeGreaterThanOrEqual(2)
    await lock.extend(5000)
    const pttls = await Promise.all(probes.map((p) => p.pttl(`${prefix}{flow}`)))
    expect(pttls.filter((t) => t > 1000).length).toBeGreaterThanOrEqual(2)
    // b is refused while a holds, then woken (pub/sub on b's own subscriber connections).
    await expect(b.acquire('flow', { retryCount: 0 })).rejects.toMatchObject({ code: 'E_LOCK_NOT_ACQUIRED' })
    // b queues on the nodes, then a's release wakes it through b's subscriber connections: well
    // before its 10 s retry delay, which is the only other way it could get the lock.
    const waiting = b.acquire('flow', { ttlMs: 1000, retryCount: 3, retryDelayMs: 10_000, retryJitterMs: 0 })
    await until(async () => (await queuedOn(probes, `${prefix}{flow}:q`)) >= 2, 'b to queue on a majority')
    const releasedAt = performance.now()
    await lock.release()
    const next = await waiting
    expect(performance.now() - releasedAt).toBeLessThan(5000)
    expect(next.fence).toBeGreaterThan(lock.fence)
    await next.release()
    expect(await holders('flow')).toEqual([null, null, null])

    // A 1 s lock held for 1.2 s, extended 800 ms before its validity ends (every ~200 ms):
    // using() must extend it several times, and nobody gets in. (A 300 ms lock extended at half
    // its ttl had 150 ms of margin: a stall of this process that long would lose it, correctly.)
    let extended = 0
    const result = await a.using('auto', { ttlMs: 1000, extendBeforeMs: 800 }, async (signal, held) => {
      const first = held.validUntil
      const end = performance.now() + 1200
      while (performance.now() < end) {
        await new Promise((r) => setTimeout(r, 50))
        if (held.validUntil > first) extended++
        expect(signal.aborted).toBe(false)
      }
      await expect(b.acquire('auto', { retryCount: 0 })).rejects.toMatchObject({
        code: 'E_LOCK_NOT_ACQUIRED',
      })
      return held.fence
    })
    expect(extended).toBeGreaterThan(0)
    expect(result).toBeGreaterThan(0)
    expect(await holders('auto')).toEqual([null, null, null])
  })

  it('four managers contending for one resource: holds never overlap, fences strictly increase', async () => {
    const history = new History()
    const workers = await Promise.all([0, 1, 2, 3].map(() => manager()))
    const ROUNDS = 15
    await Promise.all(
      workers.map(async (m, w) => {
        for (let i = 0; i < ROUNDS; i++) {
          const lock: Lock = await m.acquire('hot', {
            ttlMs: 2000,
            retryCount: 1000,
            retryDelayMs: 100,
            acquireTimeoutMs: 30_000,
          })
          const end = history.begin('hot', lock.fence, `w${w}`, lock.validityMs)
          await new Promise((r) => setImmediate(r))
          end()
          await lock.release()
        }
      }),
    )
    expect(history.holds).toHaveLength(4 * ROUNDS)
    expect(history.violations()).toEqual([])
    const fences = history.holds.map((h) => h.fence)
    expect(new Set(fences).size).toBe(fences.length)
  })

  it('a node killed with SIGKILL: the other two still make a quorum', async () => {
    const m = await manager({ nodeTimeoutMs: 300 })
    const before = await m.acquire('kill', { ttlMs: 2000 })
    await before.release()
    const victim = set.nodes[2]!
    await victim.kill()
    try {
      const lock = await m.acquire('kill', { ttlMs: 2000, retryCount: 5, retryDelayMs: 100 })
      expect(lock.fence).toBeGreaterThan(before.fence)
      const on = await holders('kill', 2)
      expect(on.every((v) => v?.startsWith(lock.token))).toBe(true)
      await lock.release()
    } finally {
      await victim.restart()
    }
  })

  it('a node restarted empty is quarantined: it holds no lock until maxTtlMs after its restart', async () => {
    const MAX_TTL = 4000
    const quarantined: { node: number; restarted: boolean }[] = []
    const onQ = (msg: unknown) => quarantined.push(msg as { node: number; restarted: boolean })
    channel('kunci:lock:quarantined').subscribe(onQ)
    try {
      const m = await manager({ quarantine: true, maxTtlMs: MAX_TTL })
      const patient = { ttlMs: 1000, retryCount: 1000, retryDelayMs: 50, acquireTimeoutMs: 20_000 }
      // Fresh (or just restarted) nodes sit out until MAX_TTL after their start: wait until all vote.
      await until(
        async () => {
          const l = await m.acquire('q-warm', patient)
          const on = await holders('q-warm')
          await l.release()
          return on.every((v) => v?.startsWith(l.token))
        },
        'all three nodes to vote',
        20_000,
      )
      quarantined.length = 0
      const victim = set.nodes[1]!
      await victim.restart({ empty: true })
      // The manager's client reconnects, reads INFO, sees a new run_id and a low uptime.
      await until(
        () => quarantined.some((q) => q.node === 1 && q.restarted),
        'node 1 to be quarantined',
        20_000,
      )
      const lock = await m.acquire('q', { ttlMs: 1000 })
      const on = await holders('q')
      expect(on[1]).toBeNull()
      expect(on[0]?.startsWith(lock.token)).toBe(true)
      expect(on[2]?.startsWith(lock.token)).toBe(true)
      await lock.release()
    } finally {
      channel('kunci:lock:quarantined').unsubscribe(onQ)
    }
  })

  it("an acquire made the moment a restarted node's client reconnects waits for the INFO check and gets no vote from it", async () => {
    const MAX_TTL = 4000
    // The quarantine channel is process-wide: the earlier tests' managers (one with quarantine
    // on) would also see node 1 restart, and could report it before this manager's client is
    // ready (a clean-clone run failed so). Only this test's manager may be open.
    for (const old of managers.splice(0)) await old.close()
    const quarantined: { node: number; restarted: boolean }[] = []
    const onQ = (msg: unknown) => quarantined.push(msg as { node: number; restarted: boolean })
    channel('kunci:lock:quarantined').subscribe(onQ)
    try {
      const cs = await clients()
      const m = await manager({ clients: cs, quarantine: true, maxTtlMs: MAX_TTL })
      const patient = { ttlMs: 1000, retryCount: 1000, retryDelayMs: 50, acquireTimeoutMs: 20_000 }
      // All three nodes vote (none is in its start-up or restart quarantine any more).
      await until(
        async () => {
          const l = await m.acquire('rc-warm', patient)
          const on = await holders('rc-warm')
          await l.release()
          return on.every((v) => v?.startsWith(l.token))
        },
        'all three nodes to vote',
        20_000,
      )
      quarantined.length = 0
      // The acquire is made from the client's own 'ready' listener: after kunci's (registered
      // first, when the manager wrapped or took the client), before any INFO reply can have
      // arrived. Only the close → unverified → held-until-INFO path keeps the node's vote out.
      const raw = cs[1] as unknown as {
        once(event: 'ready', listener: () => void): unknown
      }
      const attempt = new Promise<{ lock: Lock; checkedBefore: boolean }>((resolve, reject) => {
        raw.once('ready', () => {
          const checkedBefore = quarantined.some((q) => q.node === 1)
          m.acquire('rc', { ttlMs: 2000, retryCount: 0 }).then(
            (lock) => resolve({ lock, checkedBefore }),
            reject,
          )
        })
      })
      await set.nodes[1]!.restart({ empty: true })
      const { lock, checkedBefore } = await attempt
      expect(checkedBefore).toBe(false)
      const on = await holders('rc')
      expect(on[1]).toBeNull()
      expect(on[0]?.startsWith(lock.token)).toBe(true)
      expect(on[2]?.startsWith(lock.token)).toBe(true)
      // The check did run on the new connection and found the restart.
      await until(() => quarantined.some((q) => q.node === 1 && q.restarted), 'node 1 to be quarantined')
      await lock.release()
    } finally {
      channel('kunci:lock:quarantined').unsubscribe(onQ)
    }
  })
})
