import { setTimeout as sleep } from 'node:timers/promises'
import type { RedisNode } from '@kunci/topology'

export type NodeState = 'up' | 'down' | 'paused' | 'slow'

export interface Fault {
  /** Milliseconds after the start of the run. */
  readonly atMs: number
  readonly label: string
  run(nodes: readonly RedisNode[], state: NodeState[]): Promise<void> | void
}

async function killAndRestart(node: RedisNode, state: NodeState[], i: number, empty: boolean) {
  await node.kill()
  state[i] = 'down'
  await node.restart({ empty })
  state[i] = 'up'
}

/**
 * What happens to the 5 lock nodes while the workers run. At every moment a majority can vote:
 * at most two nodes are down, paused or in quarantine at once (quarantine lasts maxTtlMs).
 */
export const FAULT_PLAN: readonly Fault[] = [
  {
    atMs: 1_500,
    label: 'kill -9 node-1',
    run: async (n, s) => {
      await n[1]!.kill()
      s[1] = 'down'
    },
  },
  {
    atMs: 3_000,
    label: 'restart node-1 with its AOF data (quarantined for maxTtlMs)',
    run: async (n, s) => {
      await n[1]!.restart()
      s[1] = 'up'
    },
  },
  {
    atMs: 5_000,
    label: 'kill -9 node-3 and restart it EMPTY (quarantined for maxTtlMs)',
    run: (n, s) => killAndRestart(n[3]!, s, 3, true),
  },
  {
    atMs: 7_500,
    label: 'pause node-4 (SIGSTOP) for 1.5 s',
    run: (n, s) => {
      n[4]!.pause()
      s[4] = 'paused'
    },
  },
  {
    atMs: 9_000,
    label: 'resume node-4 (SIGCONT)',
    run: (n, s) => {
      n[4]!.resume()
      s[4] = 'up'
    },
  },
  {
    atMs: 10_000,
    label: 'kill -9 node-0 and node-2 (2 of 5 down)',
    run: async (n, s) => {
      await Promise.all([n[0]!.kill(), n[2]!.kill()])
      s[0] = s[2] = 'down'
    },
  },
  {
    atMs: 11_500,
    label: 'restart node-0 with data and node-2 EMPTY (both quarantined)',
    run: async (n, s) => {
      await Promise.all([n[0]!.restart(), n[2]!.restart({ empty: true })])
      s[0] = s[2] = 'up'
    },
  },
  {
    atMs: 12_000,
    label: 'add 40 ms latency to node-1 (proxy)',
    run: (n, s) => {
      n[1]!.proxy?.setLatency(40, 10)
      s[1] = 'slow'
    },
  },
  {
    atMs: 13_500,
    label: 'remove the latency on node-1',
    run: (n, s) => {
      n[1]!.proxy?.reset()
      s[1] = 'up'
    },
  },
]

export const FAULT_RUN_MS = 15_000

/** Runs `plan` on its schedule; resolves with the labels of the faults injected. */
export async function runFaults(opts: {
  plan: readonly Fault[]
  nodes: readonly RedisNode[]
  state: NodeState[]
  startedAt: number
  stop: AbortSignal
  log: (line: string) => void
}): Promise<string[]> {
  const done: string[] = []
  for (const f of opts.plan) {
    const wait = opts.startedAt + f.atMs - performance.now()
    if (wait > 0) await sleep(wait, undefined, { signal: opts.stop }).catch(() => {})
    if (opts.stop.aborted) break
    opts.log(f.label)
    await f.run(opts.nodes, opts.state)
    done.push(f.label)
  }
  return done
}
