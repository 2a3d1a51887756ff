#!/usr/bin/env node
// kunci-topology: starts local topologies for demos and manual testing, prints where they
// listen, and keeps them up in the foreground until SIGINT/SIGTERM.
//
//   kunci-topology up --nodes 5 [--aof always] [--password x] [--no-proxy] [--json]
//   kunci-topology cluster up [--masters 3] [--replicas 1] [--password x] [--aof everysec]
//                             [--node-timeout-ms 1000] [--json]
// Both also take --admin (default user off, admin user kunci-admin with a generated password;
// --admin-user/--admin-password choose them), --tls (TLS only; prints the CA file to trust) and
// --distinct-hosts (every node on its own loopback address, for iptables partitions).
import { parseArgs } from 'node:util'
import type { TopologyTls } from './certificates.js'
import { startCluster } from './cluster.js'
import { TopologyError } from './errors.js'
import type { RedisNode } from './node.js'
import { resolveAof, startNodes } from './node-set.js'
import type { AdminUserOptions } from './security.js'

export interface Command {
  name: string
  summary: string
  run(argv: string[]): Promise<number>
}

function describeNode(n: RedisNode) {
  return {
    name: n.name,
    host: n.host,
    port: n.port,
    serverPort: n.serverPort,
    pid: n.pid,
    dataDir: n.dataDir,
  }
}

const SECURITY_OPTIONS = {
  admin: { type: 'boolean', default: false },
  'admin-user': { type: 'string' },
  'admin-password': { type: 'string' },
  tls: { type: 'boolean', default: false },
  'distinct-hosts': { type: 'boolean', default: false },
} as const

function securityOptions(values: {
  admin?: boolean
  'admin-user'?: string
  'admin-password'?: string
  tls?: boolean
  'distinct-hosts'?: boolean
}): { adminUser?: AdminUserOptions; tls: boolean; distinctHosts: boolean } {
  const admin = values.admin || values['admin-user'] !== undefined || values['admin-password'] !== undefined
  return {
    ...(admin && {
      adminUser: {
        ...(values['admin-user'] !== undefined && { username: values['admin-user'] }),
        ...(values['admin-password'] !== undefined && { password: values['admin-password'] }),
      },
    }),
    tls: values.tls ?? false,
    distinctHosts: values['distinct-hosts'] ?? false,
  }
}

/** How to log in and what to trust, for the human and the --json output. */
function describeAccess(t: {
  username: string | undefined
  password: string | undefined
  tls: TopologyTls | undefined
}) {
  return { username: t.username ?? null, password: t.password ?? null, tlsCaFile: t.tls?.caFile ?? null }
}

function printAccess(access: ReturnType<typeof describeAccess>): void {
  if (access.username) console.log(`user ${access.username} (default user off), password ${access.password}`)
  if (access.tlsCaFile) {
    console.log(`TLS only: trust ${access.tlsCaFile}  (redis-cli --tls --cacert ${access.tlsCaFile})`)
  }
}

function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'))
    process.once('SIGTERM', () => resolve('SIGTERM'))
  })
}

function parseAof(value: string | undefined, fallback: string): ReturnType<typeof resolveAof> {
  const raw = value ?? fallback
  return resolveAof(raw === 'false' || raw === 'off' ? false : raw)
}

function positiveInt(name: string, value: string | undefined, fallback: number): number {
  const n = value === undefined ? fallback : Number(value)
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} expects a whole number, got ${value}`)
  return n
}

export const upCommand: Command = {
  name: 'up',
  summary: 'independent redis-server nodes (Redlock masters), each behind a fault proxy',
  async run(argv) {
    const { values } = parseArgs({
      args: argv,
      options: {
        nodes: { type: 'string', default: '3' },
        aof: { type: 'string' },
        password: { type: 'string' },
        'no-proxy': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        ...SECURITY_OPTIONS,
      },
    })
    const signal = untilSignal()
    const set = await startNodes({
      count: positiveInt('nodes', values.nodes, 3),
      aof: parseAof(values.aof, 'false'),
      ...(values.password !== undefined && { password: values.password }),
      proxy: !values['no-proxy'],
      ...securityOptions(values),
    })
    const access = describeAccess(set)
    if (values.json) console.log(JSON.stringify({ nodes: set.nodes.map(describeNode), ...access }))
    else {
      for (const n of set.nodes)
        console.log(`${n.name}  ${n.host}:${n.port}  (redis-server :${n.serverPort}, pid ${n.pid})`)
      printAccess(access)
      console.log('Ctrl-C to stop and remove the data dirs.')
    }
    await signal
    await set.stop()
    return 0
  },
}

export const clusterCommand: Command = {
  name: 'cluster',
  summary: 'cluster up: a Redis Cluster (3 masters + 3 replicas by default)',
  async run(argv) {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        masters: { type: 'string', default: '3' },
        replicas: { type: 'string', default: '1' },
        'node-timeout-ms': { type: 'string', default: '1000' },
        aof: { type: 'string' },
        password: { type: 'string' },
        json: { type: 'boolean', default: false },
        ...SECURITY_OPTIONS,
      },
    })
    if (positionals[0] !== 'up') throw new Error('usage: kunci-topology cluster up [options]')
    const signal = untilSignal()
    const cluster = await startCluster({
      masters: positiveInt('masters', values.masters, 3),
      replicasPerMaster: positiveInt('replicas', values.replicas, 1),
      nodeTimeoutMs: positiveInt('node-timeout-ms', values['node-timeout-ms'], 1_000),
      aof: parseAof(values.aof, 'everysec'),
      ...(values.password !== undefined && { password: values.password }),
      ...securityOptions(values),
    })
    const access = describeAccess(cluster)
    const masters = new Set((await cluster.masters()).map((n) => n.name))
    if (values.json) {
      const nodes = cluster.nodes.map((n) => ({
        ...describeNode(n),
        role: masters.has(n.name) ? 'master' : 'replica',
      }))
      console.log(JSON.stringify({ startupNodes: cluster.startupNodes, nodes, ...access }))
    } else {
      for (const n of cluster.nodes) {
        console.log(
          `${n.name}  ${n.host}:${n.port}  ${masters.has(n.name) ? 'master ' : 'replica'}  (pid ${n.pid})`,
        )
      }
      printAccess(access)
      console.log('Ctrl-C to stop and remove the data dirs.')
    }
    await signal
    await cluster.stop()
    return 0
  },
}

const COMMANDS: readonly Command[] = [upCommand, clusterCommand]

function usage(): string {
  return [
    'usage: kunci-topology <command> [options]',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(8)} ${c.summary}`),
  ].join('\n')
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv
  const command = COMMANDS.find((c) => c.name === name)
  if (!command) {
    console.error(usage())
    return name === undefined || name === '--help' ? 0 : 2
  }
  try {
    return await command.run(rest)
  } catch (err) {
    console.error(err instanceof TopologyError ? `${err.code}: ${err.message}` : String(err))
    return 1
  }
}

process.exitCode = await main(process.argv.slice(2))
