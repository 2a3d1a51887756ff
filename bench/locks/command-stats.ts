import { Redis } from 'ioredis'

/**
 * Server-side count: every `cmdstat_*` call on every node, which includes commands run by
 * redis.call() inside scripts (Redis 7.0 has no way to tell those apart, and INFO stats'
 * total_commands_processed counts them too).
 */
export interface ServerCommandCount {
  total: number
  /** EVAL + EVALSHA (+ FCALL): one per script run, whatever the script does inside. */
  scripts: number
  byCommand: Record<string, number>
}

export async function resetServerStats(admins: readonly Redis[]): Promise<void> {
  await Promise.all(admins.map((a) => a.config('RESETSTAT')))
}

export async function readServerStats(admins: readonly Redis[]): Promise<ServerCommandCount> {
  const byCommand: Record<string, number> = {}
  const infos = await Promise.all(admins.map((a) => a.info('commandstats')))
  for (const info of infos) {
    for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      const name = match[1]!
      byCommand[name] = (byCommand[name] ?? 0) + Number(match[2])
    }
  }
  // Our own RESETSTAT is counted after the reset it performed; INFO is not yet counted in its
  // own reply. Nothing else is sent on the admin connections in between.
  const own = byCommand['config|resetstat'] ?? 0
  if (own <= admins.length) delete byCommand['config|resetstat']
  else byCommand['config|resetstat'] = own - admins.length
  let total = 0
  let scripts = 0
  for (const [name, calls] of Object.entries(byCommand)) {
    total += calls
    if (name === 'eval' || name === 'evalsha' || name.startsWith('fcall')) scripts += calls
  }
  return { total, scripts, byCommand }
}

/**
 * Client-side count of top-level commands: every command any ioredis connection in this process
 * writes (pipelines and connections a library duplicates included, since all of them go through
 * Redis.prototype.sendCommand). Only one library runs while a window is open, and the admin
 * connections are used only outside windows.
 */
export class TopLevelCommandCounter {
  #count = 0
  #open = false

  constructor() {
    const original = Redis.prototype.sendCommand
    const counter = this
    Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
      if (counter.#open) counter.#count++
      return original.apply(this, args)
    }
  }

  open(): void {
    this.#count = 0
    this.#open = true
  }

  /** Closes the window and returns how many commands were written while it was open. */
  close(): number {
    this.#open = false
    return this.#count
  }
}
