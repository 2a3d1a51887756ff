#!/usr/bin/env node
// kunci-topology: starts local topologies for demos and manual testing, prints where they
// listen, and keeps them up in the foreground until SIGINT/SIGTERM.
//
//   kunci-topology up --nodes 5 [--aof always] [--password x] [--no-proxy] [--json]
//   kunci-topology cluster up [--masters 3] [--replicas 1] [--password x] [--aof everysec] [--json]
import { parseArgs } from 'node:util'
import { startCluster } from './cluster.js'
import { TopologyError } from './errors.js'
import type { RedisNode } from './node.js'
import { resolveAof, startNodes } from './node-set.js'

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
      },
    })
    const signal = untilSignal()
    const set = await startNodes({
      count: positiveInt('nodes', values.nodes, 3),
      aof: parseAof(values.aof, 'false'),
      ...(values.password !== undefined && { password: values.password }),
      proxy: !values['no-proxy'],
    })
    if (values.json) console.log(JSON.stringify({ nodes: set.nodes.map(describeNode) }))
    else {
      for (const n of set.nodes)
        console.log(`${n.name}  ${n.host}:${n.port}  (redis-server :${n.serverPort}, pid ${n.pid})`)
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
        aof: { type: 'string' },
        password: { type: 'string' },
        json: { type: 'boolean', default: false },
      },
    })
    if (positionals[0] !== 'up') throw new Error('usage: kunci-topology cluster up [options]')
    const signal = untilSignal()
    const cluster = await startCluster({
      masters: positiveInt('masters', values.masters, 3),
      replicasPerMaster: positiveInt('replicas', values.replicas, 1),
      aof: parseAof(values.aof, 'everysec'),
      ...(values.password !== undefined && { password: values.password }),
    })
    const masters = new Set((await cluster.masters()).map((n) => n.name))
    if (values.json) {
      const nodes = cluster.nodes.map((n) => ({
        ...describeNode(n),
        role: masters.has(n.name) ? 'master' : 'replica',
      }))
      console.log(JSON.stringify({ startupNodes: cluster.startupNodes, nodes }))
    } else {
      for (const n of cluster.nodes) {
        console.log(
          `${n.name}  ${n.host}:${n.port}  ${masters.has(n.name) ? 'master ' : 'replica'}  (pid ${n.pid})`,
        )
      }
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
