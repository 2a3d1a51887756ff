// The chips under the report's title: what the figures were measured on.
import { execFileSync } from 'node:child_process'
import { availableParallelism } from 'node:os'

function quiet(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
    }).trim()
  } catch {
    return undefined
  }
}

export function runMeta(): Record<string, string> {
  const meta: Record<string, string> = { Node: process.version, CPUs: String(availableParallelism()) }
  const commit = quiet('git', ['rev-parse', '--short', 'HEAD'])
  if (commit) meta.commit = commit
  const redis = quiet('redis-server', ['--version'])?.match(/v=(\S+)/)?.[1]
  if (redis) meta.Redis = redis
  return meta
}
