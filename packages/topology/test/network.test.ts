import { execFileSync, spawn } from 'node:child_process'
import { connect, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  eventually,
  type NetworkFaults,
  type NodeSet,
  partitionMaster,
  type RedisCluster,
  type RedisNode,
  runChaos,
  startCluster,
  startNetworkFaults,
  startNodes,
  until,
} from '../src/index.js'
import { isAlive } from './support.js'

const FIXTURE = fileURLToPath(new URL('./fixtures/network-owner.ts', import.meta.url))
const TOPOLOGY_DIR = fileURLToPath(new URL('..', import.meta.url))
const NOBODY = 65_534

const iptablesRules = () => execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })

/** A RESP connection to `to`, leaving from the address `from` (another node's, or 127.0.0.1). */
class Probe {
  readonly #socket: Socket
  #data = ''
  readonly connected: Promise<void>

  constructor(from: string, to: RedisNode) {
    this.#socket = connect({ host: to.host, port: to.port, localAddress: from })
    this.#socket.on('data', (d: Buffer) => {
      this.#data += d.toString()
    })
    this.#socket.on('error', () => {})
    this.connected = new Promise((resolve, reject) => {
      this.#socket.once('connect', () => resolve())
      this.#socket.once('error', reject)
    })
  }

  /** Sends PING; the reply is counted by pongs. */
  ping(): void {
    this.#socket.write('PING\r\n')
  }

  get pongs(): number {
    return this.#data.split('+PONG').length - 1
  }

  close(): void {
    this.#socket.destroy()
  }
}

/** True when a fresh connection from `from` gets PONG from `to` within timeoutMs. */
async function reaches(from: string, to: RedisNode, timeoutMs = 1_000): Promise<boolean> {
  const probe = new Probe(from, to)
  try {
    const connected = await Promise.race([
      probe.connected.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs)),
    ])
    if (!connected) return false
    probe.ping()
    return await until(() => probe.pongs === 1, 'PONG', timeoutMs).then(
      () => true,
      () => false,
    )
  } catch {
    return false
  } finally {
    probe.close()
  }
}

/** Runs PING against the node as uid 65534 (nobody), in a child process: 'PONG' or 'TIMEOUT'. */
function pingAs(uid: number, node: RedisNode): Promise<string> {
  const script = `
    const s = require('node:net').connect(${node.port}, '${node.host}')
    s.on('error', () => {})
    s.on('connect', () => s.write('PING\\r\\n'))
    s.on('data', (d) => { process.stdout.write(String(d).trim()); process.exit(0) })
    setTimeout(() => { process.stdout.write('TIMEOUT'); process.exit(0) }, 1500)`
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], {
      uid,
      gid: uid,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
    })
    child.once('error', reject)
    child.once('exit', () => resolve(out.replace(/^\+/, '')))
  })
}

function client(node: RedisNode): Redis {
  const c = new Redis({
    host: node.host,
    port: node.port,
    username: node.username,
    password: node.password,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2_000,
  })
  c.on('error', () => {})
  return c
}

async function replication(node: RedisNode): Promise<Map<string, string>> {
  const c = client(node)
  try {
    const info = await c.info('replication')
    return new Map(info.split(/\r?\n/).map((l) => l.split(':') as [string, string]))
  } finally {
    c.disconnect()
  }
}

describe('startNetworkFaults between two nodes', () => {
  let set: NodeSet
  let faults: NetworkFaults
  let a: RedisNode
  let b: RedisNode

  beforeAll(async () => {
    set = await startNodes({ count: 2, proxy: false, distinctHosts: true })
    ;[a, b] = set.nodes as [RedisNode, RedisNode]
    faults = await startNetworkFaults({ name: 'network-test' })
  })
  afterAll(async () => {
    await faults?.close()
    await set?.stop()
  })

  it('drops every packet both ways, established connections too, and heal restores them', async () => {
    expect(await reaches(a.host, b)).toBe(true)
    expect(await reaches(b.host, a)).toBe(true)
    const established = new Probe(a.host, b)
    try {
      await established.connected
      established.ping()
      await until(() => established.pongs === 1, 'the first PONG')

      const cut = await faults.cut(a, b)
      expect(cut.rules).toHaveLength(2)
      expect(faults.rules).toEqual(cut.rules)
      expect(iptablesRules()).toContain(`-A OUTPUT -j ${faults.chain}`)
      expect(await reaches(a.host, b)).toBe(false)
      expect(await reaches(b.host, a)).toBe(false)
      // Silence, not a refusal: the connection stays open and the PING gets no answer.
      established.ping()
      expect(
        await until(() => established.pongs === 2, 'a PONG through the cut', 1_500).catch(() => 'none'),
      ).toBe('none')
      // Only the pair is cut: 127.0.0.1 (clients, the test) still reaches both nodes.
      expect(await reaches('127.0.0.1', a)).toBe(true)
      expect(await reaches('127.0.0.1', b)).toBe(true)

      await faults.heal()
      expect(faults.rules).toEqual([])
      // TCP retransmits the PING sent during the cut, and its PONG arrives.
      await until(() => established.pongs === 2, 'the PONG of the PING sent during the cut', 15_000)
      expect(await reaches(a.host, b)).toBe(true)
      expect(await reaches(b.host, a)).toBe(true)
      await cut.heal() // a no-op once everything is healed
    } finally {
      established.close()
    }
  })

  it("a cut's own heal() removes only its rules", async () => {
    const ab = await faults.cut(a, b)
    const again = await faults.cut([b], [a])
    expect(faults.rules).toHaveLength(4)
    await ab.heal()
    expect(faults.rules).toEqual(again.rules)
    expect(await reaches(a.host, b)).toBe(false)
    await again.heal()
    expect(await reaches(a.host, b)).toBe(true)
  })

  it('cutUid drops what a process running as that uid sends to the node, and nothing of ours', async () => {
    expect(await pingAs(NOBODY, a)).toBe('PONG')
    const cut = await faults.cutUid(NOBODY, [a])
    expect(cut.rules).toEqual([`DROP uid ${NOBODY} -> ${a.host} (${a.name})`])
    expect(await pingAs(NOBODY, a)).toBe('TIMEOUT')
    expect(await pingAs(NOBODY, b)).toBe('PONG')
    expect(await reaches('127.0.0.1', a)).toBe(true)
    await cut.heal()
    expect(await pingAs(NOBODY, a)).toBe('PONG')
  })

  it('refuses nodes on 127.0.0.1 (a rule there would cut everything local) and a node on both sides', async () => {
    await using plain = await startNodes({ count: 1, proxy: false })
    const local = plain.nodes[0]!
    expect(local.host).toBe('127.0.0.1')
    await expect(faults.cut(a, local)).rejects.toMatchObject({ code: 'E_INVALID_OPTION' })
    await expect(faults.cutUid(NOBODY, [local])).rejects.toMatchObject({ code: 'E_INVALID_OPTION' })
    await expect(faults.cut([a, b], b)).rejects.toMatchObject({ code: 'E_INVALID_OPTION' })
    expect(faults.rules).toEqual([])
  })

  it('close() removes the chain and its jump from OUTPUT', async () => {
    const other = await startNetworkFaults()
    await other.cut(a, b)
    expect(iptablesRules()).toContain(`-N ${other.chain}`)
    await other.close()
    await other.close() // idempotent
    expect(iptablesRules()).not.toContain(other.chain)
    expect(await reaches(a.host, b)).toBe(true)
  })
})

describe('startNetworkFaults in a cluster', () => {
  let cluster: RedisCluster
  let faults: NetworkFaults

  beforeAll(async () => {
    cluster = await startCluster({ distinctHosts: true, adminUser: true, nodeTimeoutMs: 1_000 })
    faults = await startNetworkFaults({ name: 'network-test' })
  })
  afterAll(async () => {
    await faults?.close()
    await cluster?.stop()
  })

  it('isolate(master): the cluster itself promotes its replica; after heal the old master rejoins as a replica', async () => {
    const master = (await cluster.masters())[1]!
    const replica = (await cluster.replicaOf(master))!
    const cut = await faults.isolate(master, cluster.nodes)
    expect(cut.rules).toHaveLength(2 * (cluster.nodes.length - 1))
    // The isolated master still answers clients on 127.0.0.1; the others vote its replica in.
    await eventually(async () => expect((await replication(replica)).get('role')).toBe('master'), 30_000)
    expect((await replication(master)).get('role')).toBe('master') // it does not know yet
    // topology answers from the majority's view, not from the isolated master's stale one.
    await eventually(async () => {
      const masters = await cluster.masters()
      expect(masters).toContain(replica)
      expect(masters).not.toContain(master)
    }, 30_000)

    await faults.heal()
    await eventually(async () => {
      const info = await replication(master)
      expect(info.get('role')).toBe('slave')
      expect(info.get('master_host')).toBe(replica.host)
      expect(info.get('master_link_status')).toBe('up')
    }, 30_000)
    await cluster.waitForOk()
    // replicaOf reads one node's view, which learns the new pair by gossip: eventually, not at once.
    await eventually(async () => expect(await cluster.replicaOf(replica)).toBe(master), 30_000)
  })

  it('partitionMaster (chaos kit) cuts a master off for the step and its undo heals and waits for ok', async () => {
    const target = (await cluster.masters())[0]!
    const during: string[][] = []
    const events = await runChaos({
      schedule: [{ at: 0, fault: 'partition-master', target: target.name, durationMs: 2_500 }],
      faults: { 'partition-master': partitionMaster(cluster, faults) },
      onEvent: (u) => u.type === 'applied' && during.push([...faults.rules]),
    })
    expect(events[0]!.error).toBeUndefined()
    expect(during[0]).toHaveLength(2 * (cluster.nodes.length - 1))
    expect(faults.rules).toEqual([])
    // Whichever side won, the cluster is whole: the target is master again or a replica whose
    // link comes up (cluster_state:ok does not wait for the link's full sync).
    await eventually(async () => {
      const info = await replication(target)
      if (info.get('role') === 'slave') expect(info.get('master_link_status')).toBe('up')
    }, 30_000)
  })
})

describe('startNetworkFaults and its owner', () => {
  /** Starts the fixture owner and reads its chain and node pids. */
  async function startOwner(mode: 'idle' | 'exit') {
    const owner = spawn(process.execPath, ['--import', 'tsx', FIXTURE, mode], {
      cwd: TOPOLOGY_DIR,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise<void>((resolve) => owner.once('exit', () => resolve()))
    const line = await new Promise<string>((resolve, reject) => {
      let out = ''
      owner.stdout.on('data', (d: Buffer) => {
        out += d.toString()
        if (out.includes('\n')) resolve(out.split('\n')[0]!)
      })
      void exited.then(() => reject(new Error('the owner exited before it printed its chain')))
    })
    return { owner, exited, ...(JSON.parse(line) as { chain: string; pids: number[] }) }
  }

  it('the chain of an owner that was SIGKILLed is removed by its watchdog', async () => {
    const { owner, chain, pids } = await startOwner('idle')
    try {
      expect(iptablesRules()).toContain(`-N ${chain}`)
      owner.kill('SIGKILL')
      await until(() => !iptablesRules().includes(chain), `${chain} to be removed`, 10_000)
      await until(() => pids.every((pid) => !isAlive(pid)), 'the owner’s nodes to be killed', 10_000)
    } finally {
      owner.kill('SIGKILL')
    }
  })

  it('the chain of an owner that calls process.exit() is removed by its exit handler, before it is gone', async () => {
    const { owner, exited, chain } = await startOwner('exit')
    try {
      await exited
      // No wait: the 'exit' handler ran iptables synchronously (the watchdog would take 200 ms+).
      expect(iptablesRules()).not.toContain(chain)
    } finally {
      owner.kill('SIGKILL')
    }
  })

  it('says E_NOT_ROOT to a process that is not root', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, 'not-root'], {
      cwd: TOPOLOGY_DIR,
      uid: NOBODY,
      gid: NOBODY,
      env: { ...process.env, HOME: '/tmp' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
    })
    await new Promise((resolve) => child.once('exit', resolve))
    expect(out.trim()).toBe('E_NOT_ROOT')
  })
})
