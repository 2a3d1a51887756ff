import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateCertificates, type TopologyTls, tlsServerArgs } from './certificates.js'
import { InvalidOptionError } from './errors.js'
import { ManagedNode, type RedisNode, startOnFreePort } from './node.js'
import { findFreePort } from './ports.js'
import { startProxy } from './proxy.js'
import { trackOwnedDir, untrackOwnedDir } from './reaper.js'
import { type AdminUserOptions, type ResolvedSecurity, resolveSecurity, type TlsOptions } from './security.js'

export type AofMode = 'always' | 'everysec' | 'no' | false

export interface StartNodesOptions {
  /** Number of independent redis-server nodes (Redlock masters). */
  count: number
  /** appendfsync policy, or false for no AOF at all. @defaultValue false */
  aof?: AofMode
  /** requirepass for the default user; clients must AUTH. Not with adminUser. @defaultValue undefined */
  password?: string
  /**
   * Switch the `default` user off and create this admin user (`true`: 'kunci-admin' with a
   * generated password, see node.username/password); topology logs in as it, replicas as a
   * PSYNC-only replication user. @defaultValue undefined (the default user, with `password` if set)
   */
  adminUser?: AdminUserOptions | boolean
  /**
   * TLS only: `port 0`, `tls-port`, certificates generated into the topology's directory (CA in
   * `tls.caFile` / `tls.ca`). Clients must connect with TLS and trust that CA. @defaultValue false
   */
  tls?: TlsOptions | boolean
  /** Put a FaultProxy in front of every node. @defaultValue true */
  proxy?: boolean
  /** Where the data dirs go (a fresh sub-directory is created). @defaultValue os.tmpdir() */
  baseDir?: string
  /** Extra redis-server arguments, appended last. @defaultValue [] */
  extraArgs?: string[]
  /**
   * Every node on its own loopback address (node.host, see distinctHost()), which it binds and
   * sends from, so that iptables rules (startNetworkFaults) can cut it off; its proxy, if any,
   * listens there too. @defaultValue false (127.0.0.1)
   */
  distinctHosts?: boolean
  /**
   * Start every node with a wall clock that `node.setWallClockOffset(ms)` steps while it runs
   * (CLOCK_REALTIME, gettimeofday, time; the monotonic clock stays true), as NTP steps a host's
   * clock. Needs Linux and gcc (wall-clock.ts). @defaultValue false
   */
  steppableWallClock?: boolean
}

export const DEFAULT_NODES_OPTIONS = Object.freeze({
  aof: false,
  password: undefined,
  adminUser: undefined,
  tls: false,
  proxy: true,
  baseDir: undefined,
  extraArgs: [] as string[],
  distinctHosts: false,
  steppableWallClock: false,
} satisfies Omit<StartNodesOptions, 'count'>)

export type ResolvedNodesOptions = Required<
  Omit<StartNodesOptions, 'password' | 'baseDir' | 'adminUser' | 'tls'>
> &
  Pick<StartNodesOptions, 'baseDir'> & { security: ResolvedSecurity }

const AOF_MODES: readonly AofMode[] = ['always', 'everysec', 'no', false]

export function resolveAof(aof: unknown): AofMode {
  if (!AOF_MODES.includes(aof as AofMode)) {
    throw new InvalidOptionError('aof', `expected 'always', 'everysec', 'no' or false, got ${String(aof)}`)
  }
  return aof as AofMode
}

export function resolveNodesOptions(input: StartNodesOptions): ResolvedNodesOptions {
  const opts = { ...DEFAULT_NODES_OPTIONS, ...input }
  if (!Number.isInteger(opts.count) || opts.count < 1) {
    throw new InvalidOptionError('count', `expected an integer >= 1, got ${opts.count}`)
  }
  const security = resolveSecurity({
    password: opts.password,
    adminUser: opts.adminUser,
    tls: opts.tls,
    replication: false,
  })
  return {
    count: opts.count,
    proxy: opts.proxy,
    baseDir: opts.baseDir,
    aof: resolveAof(opts.aof),
    extraArgs: [...opts.extraArgs],
    distinctHosts: opts.distinctHosts === true,
    steppableWallClock: opts.steppableWallClock,
    security,
  }
}

/** redis-server arguments shared by independent and cluster nodes. */
export function baseServerArgs(aof: AofMode): string[] {
  // No --bind here: ManagedNode binds the node's own host (127.0.0.1, or its distinct address).
  const args = ['--save', '', '--daemonize', 'no', '--protected-mode', 'no']
  if (aof === false) args.push('--appendonly', 'no')
  else args.push('--appendonly', 'yes', '--appendfsync', aof)
  return args
}

/** A fresh directory for one topology, removed by stop() or, failing that, by the reaper. */
export function createTopologyDir(baseDir: string | undefined, prefix: string): string {
  const dir = mkdtempSync(join(baseDir ?? tmpdir(), prefix))
  trackOwnedDir(dir)
  return dir
}

export function removeTopologyDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true })
  untrackOwnedDir(dir)
}

/** The certificates when the topology speaks TLS (generated into `<dir>/tls`). */
export async function topologyTls(dir: string, security: ResolvedSecurity): Promise<TopologyTls | undefined> {
  if (!security.tls) return undefined
  return security.tls.certificates ?? generateCertificates(join(dir, 'tls'))
}

export interface NodeSet extends AsyncDisposable {
  readonly nodes: RedisNode[]
  /** The admin user with `adminUser`, undefined for the default user. */
  readonly username: string | undefined
  /** The admin user's password, or `password`. */
  readonly password: string | undefined
  /** The certificates with `tls`: clients trust `tls.ca`. */
  readonly tls: TopologyTls | undefined
  /** Stops every node and proxy and removes the data dirs. Safe to call twice. */
  stop(): Promise<void>
}

/** Starts `count` independent redis-server nodes, each behind a FaultProxy unless proxy: false. */
export async function startNodes(input: StartNodesOptions): Promise<NodeSet> {
  const opts = resolveNodesOptions(input)
  const { security } = opts
  const dir = createTopologyDir(opts.baseDir, 'kunci-nodes-')
  let tls: TopologyTls | undefined
  try {
    tls = await topologyTls(dir, security)
  } catch (err) {
    removeTopologyDir(dir)
    throw err
  }
  const nodes: ManagedNode[] = []
  for (let i = 0; i < opts.count; i++) {
    nodes.push(
      new ManagedNode({
        name: `node-${i}`,
        serverPort: await findFreePort(),
        dataDir: join(dir, `node-${i}`),
        username: security.username,
        password: security.password,
        confLines: security.confLines,
        tls,
        args: [
          ...baseServerArgs(opts.aof),
          ...(tls ? tlsServerArgs(tls, security.tls!.authClients, false) : []),
          ...opts.extraArgs,
        ],
        cleanupDir: dir,
        distinctHost: opts.distinctHosts,
        // Outside the data dir, which an empty restart removes: a host's clock outlives Redis.
        ...(opts.steppableWallClock ? { wallClockFile: join(dir, `node-${i}.wall-clock`) } : {}),
      }),
    )
  }
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      await Promise.allSettled(nodes.map((n) => n.dispose()))
      removeTopologyDir(dir)
    })())
  try {
    // One at a time: starting 5 servers at once on 2 cores only makes each PING wait longer.
    for (const node of nodes) {
      await startOnFreePort(node)
      // The proxy is created after the final serverPort is known.
      // On the node's own address: clients dial node.host:node.port.
      if (opts.proxy)
        node.proxy = await startProxy({ host: node.host, port: node.serverPort }, { host: node.host })
    }
  } catch (err) {
    await stop()
    throw err
  }
  return {
    nodes,
    username: security.username,
    password: security.password,
    tls,
    stop,
    [Symbol.asyncDispose]: stop,
  }
}
