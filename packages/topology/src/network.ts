// Real network partitions on one machine, with iptables: nodes started with `distinctHosts` each
// have their own loopback address, which they listen on and send from, so a DROP rule on a pair
// of addresses silences every link between two nodes (replication, cluster bus, any port), and an
// `-m owner --uid-owner` rule silences one process running as another user (a service instance).
//
// Decisions:
// - One chain per NetworkFaults object (KUNCI-<pid>-<n>), jumped to from the top of OUTPUT: on
//   loopback every packet passes OUTPUT once (INPUT sees it too, but OUTPUT is enough and is the
//   only chain where the owner match works). Nothing outside our chain is ever edited but the
//   one jump, so heal() is a flush and close() leaves the machine as it was.
// - DROP, never REJECT: a partition is silence; the peers find out by their own time-outs, as
//   they would across a real network. Established connections are cut as well: the rules match
//   every packet, not only new connections.
// - Only distinct addresses (never 127.0.0.1) may be named: a rule on 127.0.0.1 would cut this
//   machine's shared services (the shared Redis on 6379, PostgreSQL) as well.
// - A dead owner's chain is removed by a watchdog (reaper.ts trackCleanup). No sweep of other
//   pids' chains: a process in another pid namespace sharing this network would look dead.
import { execFile } from 'node:child_process'
import { InvalidOptionError, IptablesCommandError, IptablesMissingError, NotRootError } from './errors.js'
import type { RedisNode } from './node.js'
import { trackCleanup } from './reaper.js'

/** The rules one call added: heal() removes just them (the other cuts stay). */
export interface NetworkCut {
  /** What this cut drops, as in NetworkFaults.rules. */
  readonly rules: readonly string[]
  /** Removes this cut's rules. Idempotent; a no-op once NetworkFaults.heal() or close() ran. */
  heal(): Promise<void>
}

export interface NetworkFaults {
  /** The iptables chain that holds the rules (`iptables -S <chain>`). */
  readonly chain: string
  /**
   * Drop every packet between the two sides, both directions (node-to-node: replication, cluster
   * bus, any port). Clients on 127.0.0.1 still reach both sides.
   */
  cut(a: RedisNode | readonly RedisNode[], b: RedisNode | readonly RedisNode[]): Promise<NetworkCut>
  /** cut(node, others), `node` itself left out of `others`. */
  isolate(node: RedisNode, others: readonly RedisNode[]): Promise<NetworkCut>
  /**
   * Drop packets that processes running as `uid` send to these nodes (iptables -m owner
   * --uid-owner, OUTPUT chain): cuts one service instance off. The nodes' packets to it are let
   * through, but without its side nothing gets done (no ACK, no request, no reply read).
   */
  cutUid(uid: number, nodes: readonly RedisNode[]): Promise<NetworkCut>
  /** Remove every rule this object added (the chain stays, empty). Idempotent. */
  heal(): Promise<void>
  /** heal(), then remove the chain and its jump from OUTPUT. Idempotent. */
  close(): Promise<void>
  /** The rules in force, for logs and reports ('DROP 127.1.91.4 (node-0) -> 127.1.92.7 (node-3)'). */
  readonly rules: readonly string[]
}

export interface NetworkFaultsOptions {
  /** Put in every rule's comment (`kunci:<name>`), to tell whose rules `iptables -S` shows. @defaultValue 'faults' */
  name?: string
}

const CHAIN_PREFIX = 'KUNCI-'
/**
 * The addresses of nodes started with distinctHosts (distinctHost(): 127.1.x.y) and nothing else:
 * not 127.0.0.1, nor 127.0.1.1 (Debian's address for the host name), which others use.
 */
const DISTINCT_LOOPBACK = /^127\.1\.\d{1,3}\.\d{1,3}$/
const COMMENT = /^[A-Za-z0-9_.:-]{1,64}$/

let created = 0

function iptables(args: readonly string[]): Promise<string> {
  // -w: wait for the xtables lock instead of failing while another process edits rules.
  const all = ['-w', ...args]
  return new Promise((resolve, reject) => {
    execFile('iptables', all, { timeout: 30_000 }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout)
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        return reject(new IptablesMissingError({ cause: err }))
      reject(new IptablesCommandError(all, String(stderr), { cause: err }))
    })
  })
}

async function removeChain(chain: string): Promise<void> {
  // The jump first: a chain still referenced cannot be deleted. -D removes one copy, there is one.
  await iptables(['-D', 'OUTPUT', '-j', chain]).catch(() => undefined)
  await iptables(['-F', chain]).catch(() => undefined)
  await iptables(['-X', chain])
}

function asList(side: RedisNode | readonly RedisNode[]): readonly RedisNode[] {
  return Array.isArray(side) ? (side as readonly RedisNode[]) : [side as RedisNode]
}

function checkHost(node: RedisNode, option: string): void {
  if (!DISTINCT_LOOPBACK.test(node.host)) {
    throw new InvalidOptionError(
      option,
      `${node.name} listens on ${node.host}: partitions need nodes on addresses of their own ` +
        '(startCluster/startNodes with distinctHosts: true); a rule on 127.0.0.1 would cut everything local',
    )
  }
}

interface Rule {
  /** The match, without chain and target: ['-s', a, '-d', b]. */
  match: string[]
  text: string
}

class IptablesFaults implements NetworkFaults {
  readonly chain: string
  readonly #comment: string
  readonly #inForce = new Set<Rule>()
  /** Rule changes run one at a time, in call order: heal() after cut() never overtakes it. */
  #queue: Promise<unknown> = Promise.resolve()
  #closed = false
  #untrack: () => void = () => {}

  constructor(chain: string, name: string) {
    this.chain = chain
    this.#comment = `kunci:${name}`
  }

  get rules(): readonly string[] {
    return [...this.#inForce].map((r) => r.text)
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn)
    this.#queue = run.catch(() => undefined)
    return run
  }

  async open(): Promise<void> {
    await iptables(['-N', this.chain])
    // Registered before the jump exists, so that no moment leaves a jump nobody would remove.
    this.#untrack = trackCleanup([
      ['iptables', '-w', '-D', 'OUTPUT', '-j', this.chain],
      ['iptables', '-w', '-F', this.chain],
      ['iptables', '-w', '-X', this.chain],
    ])
    // At the top: an ACCEPT for established connections further down must not let them through.
    await iptables(['-I', 'OUTPUT', '1', '-j', this.chain])
  }

  async #add(rules: Rule[]): Promise<NetworkCut> {
    if (this.#closed) throw new InvalidOptionError('faults', `${this.chain} is closed`)
    return this.#serial(async () => {
      const added: Rule[] = []
      try {
        for (const rule of rules) {
          await iptables(['-A', this.chain, ...this.#spec(rule)])
          this.#inForce.add(rule)
          added.push(rule)
        }
      } catch (err) {
        // All or nothing: a half-made cut would be a different fault than the one asked for.
        await this.#remove(added)
        throw err
      }
      return { rules: added.map((r) => r.text), heal: () => this.#serial(() => this.#remove(added)) }
    })
  }

  #spec(rule: Rule): string[] {
    return [...rule.match, '-m', 'comment', '--comment', this.#comment, '-j', 'DROP']
  }

  async #remove(rules: readonly Rule[]): Promise<void> {
    for (const rule of rules) {
      if (!this.#inForce.has(rule)) continue
      await iptables(['-D', this.chain, ...this.#spec(rule)])
      this.#inForce.delete(rule)
    }
  }

  // async: a bad argument rejects the promise like every other failure, never throws at the call.
  async cut(a: RedisNode | readonly RedisNode[], b: RedisNode | readonly RedisNode[]): Promise<NetworkCut> {
    const left = asList(a)
    const right = asList(b)
    for (const n of left) checkHost(n, 'a')
    for (const n of right) checkHost(n, 'b')
    const rules: Rule[] = []
    for (const x of left) {
      for (const y of right) {
        if (x.host === y.host) {
          throw new InvalidOptionError('b', `${y.name} is on both sides of the cut (${y.host})`)
        }
        rules.push(
          {
            match: ['-s', x.host, '-d', y.host],
            text: `DROP ${x.host} (${x.name}) -> ${y.host} (${y.name})`,
          },
          {
            match: ['-s', y.host, '-d', x.host],
            text: `DROP ${y.host} (${y.name}) -> ${x.host} (${x.name})`,
          },
        )
      }
    }
    return this.#add(rules)
  }

  async isolate(node: RedisNode, others: readonly RedisNode[]): Promise<NetworkCut> {
    return this.cut(
      node,
      others.filter((o) => o !== node && o.host !== node.host),
    )
  }

  async cutUid(uid: number, nodes: readonly RedisNode[]): Promise<NetworkCut> {
    if (!Number.isInteger(uid) || uid < 0)
      throw new InvalidOptionError('uid', `expected an integer >= 0, got ${uid}`)
    for (const n of nodes) checkHost(n, 'nodes')
    return this.#add(
      nodes.map((n) => ({
        match: ['-d', n.host, '-m', 'owner', '--uid-owner', String(uid)],
        text: `DROP uid ${uid} -> ${n.host} (${n.name})`,
      })),
    )
  }

  heal(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    return this.#serial(async () => {
      await iptables(['-F', this.chain])
      this.#inForce.clear()
    })
  }

  #closing: Promise<void> | undefined
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.heal()
      this.#closed = true
      await this.#serial(() => removeChain(this.chain))
      this.#untrack()
    })()
    return this.#closing
  }
}

/**
 * A fresh iptables chain for partitions between nodes started with `distinctHosts` (and between a
 * uid and nodes). Needs root and iptables: throws NotRootError (E_NOT_ROOT) or IptablesMissingError
 * (E_IPTABLES_MISSING) saying what to do. Close it when done; a SIGKILLed owner's chain is removed
 * by a watchdog.
 */
export async function startNetworkFaults(options: NetworkFaultsOptions = {}): Promise<NetworkFaults> {
  const name = options.name ?? 'faults'
  if (!COMMENT.test(name)) {
    throw new InvalidOptionError('name', `expected 1-64 of A-Z a-z 0-9 _ . : -, got '${name}'`)
  }
  const uid = process.getuid?.()
  if (uid !== 0) throw new NotRootError(uid)
  const faults = new IptablesFaults(`${CHAIN_PREFIX}${process.pid}-${created++}`, name)
  try {
    await faults.open()
  } catch (err) {
    await faults.close().catch(() => undefined)
    throw err
  }
  return faults
}
