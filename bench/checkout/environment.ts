// What the numbers were measured on, and where the raw samples go.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { cwd: ROOT, encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

export interface Environment {
  date: string
  commit: string
  /** Uncommitted changes in the measured code, which the commit alone does not pin. */
  uncommitted: string[]
  node: string
  redis: string
  postgres: string
  cpu: string
  cores: number
  memoryGb: number
  /** 1, 5, 15-minute load averages when the bench started (the machine is shared). */
  loadAverageAtStart: number[]
  platform: string
}

export function describeEnvironment(postgres: string): Environment {
  const status = run('git', [
    'status',
    '--porcelain',
    '--',
    'apps/flash-sale/src',
    'apps/flash-sale-lab/src',
    'packages/kunci/src',
    'bench/checkout',
  ])
  return {
    date: new Date().toISOString(),
    commit: run('git', ['rev-parse', 'HEAD']),
    uncommitted: status === 'unknown' || status === '' ? [] : status.split('\n'),
    node: process.version,
    redis: /v=(\S+)/.exec(run('redis-server', ['--version']))?.[1] ?? 'unknown',
    postgres,
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    loadAverageAtStart: loadAverage(),
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
  }
}

export function loadAverage(): number[] {
  return os.loadavg().map((l) => Number(l.toFixed(2)))
}

/** bench/results/<prefix>-<date>-<shortsha>[-quick][-n].json; never overwrites an earlier run. */
export function writeResults(env: Environment, quick: boolean, data: unknown, prefix = 'checkout'): string {
  const dir = `${ROOT}bench/results`
  mkdirSync(dir, { recursive: true })
  const base = `${prefix}-${env.date.slice(0, 10)}-${env.commit.slice(0, 7)}${quick ? '-quick' : ''}`
  let path = `${dir}/${base}.json`
  for (let n = 2; existsSync(path); n++) path = `${dir}/${base}-${n}.json`
  writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`)
  return path.slice(ROOT.length)
}
