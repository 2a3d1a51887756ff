import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { InvalidOptionError } from './errors.js'
import { ManagedNode, type RedisNode, startOnFreePort } from './node.js'
import { findFreePort } from './ports.js'
import { startProxy } from './proxy.js'
import { trackOwnedDir, untrackOwnedDir } from './reaper.js'

export type AofMode = 'always' | 'everysec' | 'no' | false

export interface StartNodesOptions {
  /** Number of independent redis-server nodes (Redlock masters). */
  count: number
  /** appendfsync policy, or false for no AOF at all. @defaultValue false */
  aof?: AofMode
  /** requirepass for the default user; clients must AUTH. @defaultValue undefined */
  password?: string
  /** Put a FaultProxy in front of every node. @defaultValue true */
  proxy?: boolean
  /** Where the data dirs go (a fresh sub-directory is created). @defaultValue os.tmpdir() */
  baseDir?: string
  /** Extra redis-server arguments, appended last. @defaultValue [] */
  extraArgs?: string[]
}

export const DEFAULT_NODES_OPTIONS = Object.freeze({
  aof: false,
  password: undefined,
  proxy: true,
  baseDir: undefined,
  extraArgs: [] as string[],
} satisfies Omit<StartNodesOptions, 'count'>)

export type ResolvedNodesOptions = Required<Omit<StartNodesOptions, 'password' | 'baseDir'>> &
  Pick<StartNodesOptions, 'password' | 'baseDir'>

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
  if (opts.password === '') throw new InvalidOptionError('password', 'must not be empty')
  return { ...opts, aof: resolveAof(opts.aof), extraArgs: [...opts.extraArgs] }
}

/** redis-server arguments shared by independent and cluster nodes. */
export function baseServerArgs(aof: AofMode): string[] {
  const args = ['--bind', '127.0.0.1', '--save', '', '--daemonize', 'no', '--protected-mode', 'no']
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

export interface NodeSet extends AsyncDisposable {
  readonly nodes: RedisNode[]
  /** Stops every node and proxy and removes the data dirs. Safe to call twice. */
  stop(): Promise<void>
}

/** Starts `count` independent redis-server nodes, each behind a FaultProxy unless proxy: false. */
export async function startNodes(input: StartNodesOptions): Promise<NodeSet> {
  const opts = resolveNodesOptions(input)
  const dir = createTopologyDir(opts.baseDir, 'kunci-nodes-')
  const nodes: ManagedNode[] = []
  for (let i = 0; i < opts.count; i++) {
    nodes.push(
      new ManagedNode({
        name: `node-${i}`,
        serverPort: await findFreePort(),
        dataDir: join(dir, `node-${i}`),
        password: opts.password,
        args: [...baseServerArgs(opts.aof), ...opts.extraArgs],
        cleanupDir: dir,
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
      if (opts.proxy) node.proxy = await startProxy({ host: node.host, port: node.serverPort })
    }
  } catch (err) {
    await stop()
    throw err
  }
  return { nodes, stop, [Symbol.asyncDispose]: stop }
}
