/**
 * The restart quarantine must not trust a node's wall clock (issue 21). Redis 7.0 computes INFO
 * `uptime_in_seconds` from its wall clock, so a node that restarted empty and whose clock then
 * stepped forward looks old enough to vote at once. Real redis-server processes, restarted
 * empty, with a real wall-clock step (topology's steppableWallClock: CLOCK_REALTIME moves, the
 * monotonic clock does not, as when NTP steps a host).
 *
 * Holder A is granted on all three nodes; the three are killed and restarted empty, and their
 * wall clocks step. While A still holds, nobody else may be granted:
 *  - B, a manager that knew the nodes (saw their run_ids before the restart), quarantines each
 *    one for maxTtlMs from the moment it sees the new run_id, on its own monotonic clock;
 *  - C, a manager that never saw the nodes (first contact), has only INFO: a node whose clock is
 *    ahead of C's by more than clockToleranceMs is quarantined for maxTtlMs;
 *  - the documented limit: a node whose clock was BEHIND when it started and was then stepped
 *    to the right time reports an uptime too long by the step, and agrees with C's clock: C
 *    trusts it (the double grant is real), unless C runs with firstContact: 'full'.
 */
import { type Lock, Redlock, type RedlockOptions } from 'kunci'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { History } from '../support/history.js'
import { type Fixture, ready, startFixture, until } from '../support/nodes.js'

const MAX_TTL = 6000
const STEP = 3 * MAX_TTL

const fixtures: Fixture[] = []
const managers: Redlock[] = []
afterEach(async () => {
  for (const m of managers.splice(0)) await m.close()
})
afterAll(async () => {
  for (const f of fixtures) await f.stop()
})

type Outcome = Lock | { code: string; votes: { status: string }[] }
const statuses = (g: Outcome) => ('votes' in g ? g.votes.map((v) => v.status) : ['granted'])

function manager(clients: RedlockOptions['clients'], o: Partial<RedlockOptions> = {}): Redlock {
  // A generous nodeTimeoutMs: on a loaded machine a node that is up must not time out, so that
  // a refusal below is the quarantine's and not a slow answer's.
  const m = new Redlock({ clients, nodeTimeoutMs: 1000, maxTtlMs: MAX_TTL, onWarning: () => {}, ...o })
  managers.push(m)
  return m
}

const patient = { ttlMs: 500, retryCount: 10_000, retryDelayMs: 50, acquireTimeoutMs: 30_000 }

/** Waits until a grant of `m` reaches every node: each one has been checked and votes. */
async function votingEverywhere(m: Redlock, probe: ReturnType<Fixture['clients']>): Promise<void> {
  await until(
    async () => {
      const l = await m.acquire('warm', patient)
      const on = await Promise.all(probe.map(async (c) => (await c.get('kunci:{warm}')) === l.token))
      await l.release()
      return on.every(Boolean)
    },
    'every node to vote',
    30_000,
  )
}

async function uptimeS(c: ReturnType<Fixture['clients']>[number]): Promise<number> {
  return Number(/^uptime_in_seconds:(-?\d+)/m.exec(await c.info('server'))?.[1])
}

async function tryOnce(m: Redlock): Promise<Outcome> {
  return m.acquire('acct', { ttlMs: MAX_TTL, retryCount: 0 }).then(
    (lock) => lock,
    (err: { code: string; votes: { status: string }[] }) => err,
  )
}

/**
 * Single attempts until one is granted or one hears from every node: a node whose check (INFO)
 * is still in flight when two others have refused is reported `pending`, and we want each
 * node's own answer.
 */
async function tryUntilEveryNodeAnswers(m: Redlock): Promise<Outcome> {
  let last: Outcome | undefined
  await until(async () => {
    last = await tryOnce(m)
    return 'fence' in last || !statuses(last).includes('pending')
  }, 'an attempt that every node answers')
  return last!
}

/**
 * A holds `acct` on all three nodes; they are killed and restarted empty; then `clock` moves
 * their wall clocks (before their start and/or after). B (knew the nodes) and the first-contact
 * managers try once each while A still holds.
 */
async function scenario(clock: { atStartMs: number; afterStartMs: number }) {
  const f = await startFixture({ count: 3, steppableWallClock: true })
  fixtures.push(f)
  const probe = f.clients()
  await ready(probe)
  const history = new History()
  // A's clients neither queue nor resend while disconnected (the recommended settings).
  const a = manager(f.clients({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false }))
  const bClients = f.clients()
  const b = manager(bClients)
  // Fresh nodes sit out until maxTtlMs after their start; wait until all three vote for both,
  // so that B has seen every node's run_id before the restart.
  await votingEverywhere(a, probe)
  await votingEverywhere(b, probe)

  const lockA = await a.acquire('acct', { ttlMs: MAX_TTL, retryCount: 0 })
  const endA = history.begin('acct', lockA.fence, 'A', lockA.validityMs)
  for (const n of f.set.nodes) n.setWallClockOffset(clock.atStartMs)
  await Promise.all(
    f.set.nodes.map(async (n) => {
      await n.kill()
      await n.restart({ empty: true })
    }),
  )
  for (const n of f.set.nodes) n.setWallClockOffset(clock.afterStartMs)
  // The step is in place: each node's uptime counts it.
  const minUptimeS = Math.floor((clock.afterStartMs - clock.atStartMs) / 1000)
  await until(
    async () =>
      (await Promise.all(probe.map((c) => uptimeS(c).catch(() => -1)))).every((u) => u >= minUptimeS),
    'the restarted nodes to show the clock step in their uptime',
  )
  // B's clients are back on the restarted nodes (its next request waits for INFO on them).
  await until(() => bClients.every((c) => c.status === 'ready'), "B's clients to reconnect")
  const cClients = f.clients()
  const fullClients = f.clients()
  await ready([...cClients, ...fullClients])
  const c = manager(cClients)
  const full = manager(fullClients, { firstContact: 'full' })
  // Each grant is recorded the moment it is made and released before the next manager tries, so
  // one grant does not hold the others back until A's validity has passed (before the fix, C was
  // granted, and `full` then waited out C's TTL: the overlap went unrecorded).
  const got = {} as Record<'B' | 'C' | 'full', Outcome>
  for (const [who, m] of [
    ['B', b],
    ['C', c],
    ['full', full],
  ] as const) {
    const g = await tryUntilEveryNodeAnswers(m)
    got[who] = g
    if ('fence' in g) {
      const end = history.begin('acct', g.fence, who, g.validityMs)
      end()
      await g.release()
    }
  }
  // Not vacuous: A's lock was still valid when the others had tried.
  const aStillValid = lockA.validityMs > 0
  endA()
  return { history, got, aStillValid }
}

describe('restart quarantine with a wall-clock step on the restarted nodes', () => {
  it('restarted empty, then stepped forward by more than maxTtlMs: nobody is granted while A holds', async () => {
    const { history, got, aStillValid } = await scenario({ atStartMs: 0, afterStartMs: STEP })
    expect(aStillValid).toBe(true)
    // B saw each run_id change: maxTtlMs from then, on its own monotonic clock.
    expect(statuses(got.B), JSON.stringify(got.B)).toEqual(['quarantined', 'quarantined', 'quarantined'])
    // C meets the nodes for the first time: their clocks are STEP ahead of C's.
    expect(statuses(got.C), JSON.stringify(got.C)).toEqual(['quarantined', 'quarantined', 'quarantined'])
    expect(statuses(got.full)).toEqual(['quarantined', 'quarantined', 'quarantined'])
    expect(history.violations()).toEqual([])
  })

  it('started with a clock behind, then stepped to the right time (the documented first-contact limit)', async () => {
    const { history, got, aStillValid } = await scenario({ atStartMs: -STEP, afterStartMs: 0 })
    expect(aStillValid).toBe(true)
    // A manager that knew the nodes is not fooled.
    expect(statuses(got.B), JSON.stringify(got.B)).toEqual(['quarantined', 'quarantined', 'quarantined'])
    // firstContact: 'full' is not fooled either.
    expect(statuses(got.full), JSON.stringify(got.full)).toEqual([
      'quarantined',
      'quarantined',
      'quarantined',
    ])
    // A new manager that trusts uptime cannot tell: the limit docs/locks.md states.
    expect('fence' in got.C, JSON.stringify(got.C)).toBe(true)
    expect(history.violations().map((v) => `${v.kind} ${v.a.owner}/${v.b.owner}`)).toEqual(['overlap A/C'])
  })
})
