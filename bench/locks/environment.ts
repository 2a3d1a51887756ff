import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

const PACKAGES = {
  kunci: 'packages/kunci/package.json',
  'node-redlock': 'node_modules/redlock/package.json',
  'sesamecare-redlock': 'node_modules/@sesamecare-oss/redlock/package.json',
  'redlock-universal': 'node_modules/redlock-universal/package.json',
  'redis-semaphore': 'node_modules/redis-semaphore/package.json',
  ioredis: 'node_modules/ioredis/package.json',
}

function git(...args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

export interface Environment {
  date: string
  commit: string
  /** Uncommitted changes under the code being measured, which the commit alone does not pin. */
  uncommitted: string[]
  node: string
  redis: string
  cpu: string
  cores: number
  loadAverageAtStart: number[]
  platform: string
  versions: Record<string, string>
}

export async function describeEnvironment(admin: Redis): Promise<Environment> {
  const info = await admin.info('server')
  const versions: Record<string, string> = {}
  for (const [name, path] of Object.entries(PACKAGES)) {
    const file = `${ROOT}${path}`
    versions[name] = existsSync(file)
      ? (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version
      : '-'
  }
  const status = git('status', '--porcelain', '--', 'packages/kunci/src', 'bench/locks')
  return {
    date: new Date().toISOString(),
    commit: git('rev-parse', 'HEAD'),
    uncommitted: status === 'unknown' || status === '' ? [] : status.split('\n'),
    node: process.version,
    redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    loadAverageAtStart: os.loadavg().map((l) => Number(l.toFixed(2))),
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    versions,
  }
}

/** bench/results/locks-<date>-<shortsha>[-quick][-n].json; never overwrites an earlier run. */
export function writeResults(env: Environment, quick: boolean, data: unknown): string {
  const dir = `${ROOT}bench/results`
  mkdirSync(dir, { recursive: true })
  const base = `locks-${env.date.slice(0, 10)}-${env.commit.slice(0, 7)}${quick ? '-quick' : ''}`
  let path = `${dir}/${base}.json`
  for (let n = 2; existsSync(path); n++) path = `${dir}/${base}-${n}.json`
  writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`)
  return path.slice(ROOT.length)
}
