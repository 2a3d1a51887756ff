// Where the machine's CPU went during one run, from /proc (Linux): the load generator (this
// process), the target's service processes, its worker, its Redis nodes, PostgreSQL (shared with
// other users of this machine), the bench's host processes, and everything else on the machine
// ("other": other engineers' tests, builds…). Figures are cores: CPU seconds per wall second, so
// on a 2-core machine they add up to at most 2.
//
// Why: the ratio compares a bare server with a service whose every request also costs
// Redis, worker and SQL work on the same 2 cores; this shows how the cores were shared instead of
// guessing. Elsewhere than Linux the sampler returns nothing.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

export type CpuCategory = 'loadgen' | 'service' | 'worker' | 'redis' | 'postgres' | 'host' | 'other'

export type CpuShare = Partial<Record<CpuCategory, number>>

const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
  } catch {
    return 100
  }
})()

interface Proc {
  ppid: number
  comm: string
  ticks: number
}

interface Snapshot {
  at: number
  procs: Map<number, Proc>
  busy: number
}

function readProcs(): Map<number, Proc> {
  const procs = new Map<number, Proc>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const close = stat.lastIndexOf(')')
      const comm = stat.slice(stat.indexOf('(') + 1, close)
      const f = stat.slice(close + 2).split(' ')
      // After "pid (comm) ": state ppid … utime is field 14 of stat, i.e. f[11]; stime f[12].
      procs.set(Number(name), { ppid: Number(f[1]), comm, ticks: Number(f[11]) + Number(f[12]) })
    } catch {
      // The process exited between readdir and read.
    }
  }
  return procs
}

function machineBusyTicks(): number {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0)
  return total - cpu[3]! - cpu[4]! // minus idle and iowait
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
  } catch {
    return ''
  }
}

export class CpuSampler {
  readonly #available = existsSync('/proc/stat')
  #start: Snapshot | undefined

  start(): void {
    if (this.#available) this.#start = { at: performance.now(), procs: readProcs(), busy: machineBusyTicks() }
  }

  /** Cores used per category since start(); `roots` are the pids of the target's processes. */
  stop(roots: number[]): CpuShare {
    const start = this.#start
    if (!start) return {}
    const end: Snapshot = { at: performance.now(), procs: readProcs(), busy: machineBusyTicks() }
    const seconds = (end.at - start.at) / 1000
    const ours = new Set(roots)
    // Descendants of the roots (several passes: /proc order is not parent-first).
    for (let grew = true; grew; ) {
      grew = false
      for (const [pid, p] of end.procs) {
        if (!ours.has(pid) && ours.has(p.ppid)) {
          ours.add(pid)
          grew = true
        }
      }
    }
    const share: Record<string, number> = {}
    let accounted = 0
    for (const [pid, p] of end.procs) {
      const used = p.ticks - (start.procs.get(pid)?.ticks ?? 0)
      if (used <= 0) continue
      let category: CpuCategory | undefined
      if (pid === process.pid) category = 'loadgen'
      else if (p.comm === 'postgres') category = 'postgres'
      else if (ours.has(pid)) {
        const cmd = cmdline(pid)
        if (p.comm.startsWith('redis-server')) category = 'redis'
        else if (cmd.includes('main.js worker')) category = 'worker'
        else if (cmd.includes('main.js serve') || cmd.includes('bare-server') || cmd.includes('floor-server'))
          category = 'service'
        else category = 'host'
      }
      if (!category) continue
      share[category] = (share[category] ?? 0) + used
      accounted += used
    }
    share.other = Math.max(0, end.busy - start.busy - accounted)
    const out: CpuShare = {}
    for (const [k, ticks] of Object.entries(share)) {
      out[k as CpuCategory] = Math.round((ticks / TICKS_PER_SECOND / seconds) * 100) / 100
    }
    return out
  }
}

/** The pids below `root` (any depth) whose command line contains `match` (Linux; [] elsewhere). */
export function descendantPids(root: number, match: string): number[] {
  if (!existsSync('/proc/stat')) return []
  const procs = readProcs()
  const ours = new Set([root])
  for (let grew = true; grew; ) {
    grew = false
    for (const [pid, p] of procs) {
      if (!ours.has(pid) && ours.has(p.ppid)) {
        ours.add(pid)
        grew = true
      }
    }
  }
  return [...ours].filter((pid) => pid !== root && cmdline(pid).includes(match))
}
