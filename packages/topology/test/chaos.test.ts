import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ChaosUpdate,
  InvalidOptionError,
  killClusterMaster,
  killNode,
  killProcess,
  type NodeSet,
  parseDuration,
  pauseNode,
  type RedisCluster,
  resolveSchedule,
  runChaos,
  startCluster,
  startNodes,
  until,
} from '../src/index.js'
import { client, isAlive, settledWithin } from './support.js'

describe('parseDuration and resolveSchedule', () => {
  it('reads ms, s, m and compound durations', () => {
    expect(parseDuration('500ms')).toBe(500)
    expect(parseDuration('20s')).toBe(20_000)
    expect(parseDuration('1m')).toBe(60_000)
    expect(parseDuration('1m30s')).toBe(90_000)
    expect(parseDuration('1.5s')).toBe(1_500)
    expect(parseDuration(250)).toBe(250)
    expect(parseDuration('0')).toBe(0)
  })

  it.each(['', '20', 'soon', '5 s', '-1s', '1s2x'])(
    'rejects %j with a typed error naming the option',
    (bad) => {
      const err = (() => {
        try {
          parseDuration(bad, 'schedule[0].at')
        } catch (e) {
          return e
        }
      })()
      expect(err).toBeInstanceOf(InvalidOptionError)
      expect((err as InvalidOptionError).code).toBe('E_INVALID_OPTION')
      expect((err as InvalidOptionError).option).toBe('schedule[0].at')
    },
  )

  it('rejects an unknown fault, a bad at and a negative duration before anything runs', () => {
    const faults = { pause: async () => undefined }
    const option = (schedule: unknown) => {
      try {
        resolveSchedule(schedule as never, faults)
      } catch (e) {
        return (e as InvalidOptionError).option
      }
      return 'no error'
    }
    expect(
      option([
        { at: '1s', fault: 'pause' },
        { at: '2s', fault: 'nuke' },
      ]),
    ).toBe('schedule[1].fault')
    expect(option([{ at: 'later', fault: 'pause' }])).toBe('schedule[0].at')
    expect(option([{ at: '1s', fault: 'pause', durationMs: -5 }])).toBe('schedule[0].durationMs')
    expect(option({})).toBe('schedule')
    expect(resolveSchedule([{ at: '1m', fault: 'pause' }], faults)[0]).toMatchObject({
      atMs: 60_000,
      durationMs: 0,
    })
  })
})

describe('runChaos on independent nodes', () => {
  let set: NodeSet

  beforeAll(async () => {
    set = await startNodes({ count: 3, aof: 'always', proxy: false })
  })
  afterAll(async () => {
    await set?.stop()
  })

  it('kills a lock node and restarts it with its data, pauses another for its duration', async () => {
    const [, killed, paused] = set.nodes
    const c = client(killed!.port)
    await c.set('chaos:kept', 'yes')
    c.disconnect()
    const oldPid = killed!.pid!
    const updates: ChaosUpdate[] = []
    let sawKilledDown = false
    let pausedAnswered: 'settled' | 'pending' | undefined

    const events = await runChaos({
      schedule: [
        { at: '100ms', fault: 'kill-lock-node', target: 'node-1', durationMs: 300 },
        { at: '200ms', fault: 'pause-node', target: '2', durationMs: 1_000, label: 'SIGSTOP node-2' },
      ],
      faults: { 'kill-lock-node': killNode(set.nodes), 'pause-node': pauseNode(set.nodes) },
      onEvent: (u) => {
        updates.push(u)
        if (u.type === 'applied' && u.event.fault === 'kill-lock-node') sawKilledDown = !killed!.running
        if (u.type === 'applied' && u.event.fault === 'pause-node') {
          const p = client(paused!.port, { commandTimeout: 5_000 })
          void settledWithin(p.ping(), 300)
            .then((r) => (pausedAnswered = r))
            .finally(() => p.disconnect())
        }
      },
    })

    expect(sawKilledDown).toBe(true)
    expect(isAlive(oldPid)).toBe(false)
    expect(killed!.running).toBe(true)
    const after = client(killed!.port)
    expect(await after.get('chaos:kept')).toBe('yes')
    after.disconnect()
    await until(() => pausedAnswered !== undefined, 'the paused node to answer', 5_000)
    expect(pausedAnswered).toBe('pending')
    const p = client(paused!.port)
    expect(await p.ping()).toBe('PONG')
    p.disconnect()

    expect(events.map((e) => e.label)).toEqual(['kill-lock-node', 'SIGSTOP node-2'])
    for (const e of events) {
      expect(e.error).toBeUndefined()
      expect(e.startedMs).toBeGreaterThanOrEqual(e.at)
      expect(e.endedMs!).toBeGreaterThanOrEqual(e.appliedMs!)
    }
    const pauseEvent = events[1]!
    expect(pauseEvent.endedMs! - pauseEvent.appliedMs!).toBeGreaterThanOrEqual(1_000 - 20)
    expect(updates.filter((u) => u.type === 'end')).toHaveLength(2)
    expect(JSON.parse(JSON.stringify(events))).toEqual(events)
  })

  it('records a failing handler and carries on with the next step', async () => {
    const events = await runChaos({
      schedule: [
        { at: 0, fault: 'pause-node', target: 'node-9' },
        { at: '50ms', fault: 'pause-node', target: 'node-0', durationMs: 50 },
      ],
      faults: { 'pause-node': pauseNode(set.nodes) },
    })
    expect(events[0]).toMatchObject({ errorCode: 'E_INVALID_OPTION' })
    expect(events[1]!.error).toBeUndefined()
    expect(set.nodes[0]!.running).toBe(true)
  })

  it('on abort starts no further step and resumes a paused node at once', async () => {
    const controller = new AbortController()
    const node = set.nodes[0]!
    const run = runChaos({
      schedule: [
        { at: 0, fault: 'pause-node', target: 'node-0', durationMs: 60_000 },
        { at: '30s', fault: 'pause-node', target: 'node-1', durationMs: 1_000 },
      ],
      faults: { 'pause-node': pauseNode(set.nodes) },
      signal: controller.signal,
      onEvent: (u) => u.type === 'applied' && controller.abort(),
    })
    expect(await settledWithin(run, 10_000)).toBe('settled')
    const events = await run
    expect(events).toHaveLength(1)
    expect(events[0]!.endedMs!).toBeLessThan(10_000)
    const c = client(node.port)
    expect(await c.ping()).toBe('PONG')
    c.disconnect()
  })
})

describe('killProcess', () => {
  it('kill -9s the named child, waits for its exit and restarts it', async () => {
    const spawnChild = async () => {
      const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
      await once(child, 'spawn')
      return child
    }
    let worker: ChildProcess | undefined = await spawnChild()
    const first = worker
    const restarted: number[] = []
    try {
      const events = await runChaos({
        schedule: [{ at: '50ms', fault: 'kill-worker', target: 'worker', durationMs: 100 }],
        faults: {
          'kill-worker': killProcess({
            worker: {
              current: () => worker,
              restart: async () => {
                worker = await spawnChild()
                restarted.push(worker.pid!)
              },
            },
          }),
        },
      })
      expect(events[0]!.error).toBeUndefined()
      expect(first.signalCode).toBe('SIGKILL')
      expect(restarted).toHaveLength(1)
      expect(worker.pid).not.toBe(first.pid)
      expect(isAlive(worker.pid!)).toBe(true)
    } finally {
      worker?.kill('SIGKILL')
    }
  })
})

describe('killClusterMaster', () => {
  let cluster: RedisCluster

  beforeAll(async () => {
    cluster = await startCluster({ aof: 'everysec' })
  }, 120_000)
  afterAll(async () => {
    await cluster?.stop()
  })

  it('fails a master over to its replica and rejoins the old one as a replica', async () => {
    const before = (await cluster.masters())[0]!
    const events = await runChaos({
      schedule: [{ at: '100ms', fault: 'kill-master', target: before.name }],
      faults: { 'kill-master': killClusterMaster(cluster) },
    })
    expect(events[0]!.error).toBeUndefined()
    const masters = await cluster.masters()
    expect(masters).toHaveLength(3)
    expect(masters).not.toContain(before)
    expect(before.running).toBe(true)
    await cluster.waitForOk()
  }, 120_000)
})
