#!/usr/bin/env node
import type { Command } from './command.js'
import { migrateCommand } from './migrate.js'
import { reconcileCommand } from './reconcile.js'
import { serveCommand } from './serve.js'
import { workerCommand } from './worker.js'

// What ships: the service, its worker and their operations. The tools that drive it (up, load,
// demo) are the lab's CLI, apps/flash-sale-lab.
const COMMANDS: Command[] = [serveCommand, workerCommand, migrateCommand, reconcileCommand]

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length))
  return [
    'usage: flash-sale <command> [flags]   (flash-sale <command> --help for its flags)',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
  ].join('\n')
}

// Started by a local stack (`flash-sale-lab up`, the demo, tests) or by the lab's CLI: when that
// process goes away, even by SIGKILL, its IPC channel closes and this one drains and stops.
if (process.env.FLASH_SALE_EXIT_WITH_PARENT === '1' && process.channel) {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'))
  process.channel.unref()
}

const EXIT_GRACE_MS = 2_000

const [name, ...rest] = process.argv.slice(2)
const command = COMMANDS.find((c) => c.name === name)
if (!command) {
  console.error(
    name && name !== '--help' && name !== 'help' ? `unknown command "${name}"\n\n${usage()}` : usage(),
  )
  process.exitCode = name ? 2 : 0
} else {
  command.run(rest).then(
    (code) => {
      process.exitCode = code
      exitSoon()
    },
    (err: unknown) => {
      console.error(`flash-sale ${command.name}: ${(err as Error)?.stack ?? err}`)
      process.exitCode = 1
      exitSoon()
    },
  )
}

/**
 * The command is done: the process exits once its event loop is empty. A handle something left
 * open (a client's reconnect timer, a socket) would keep it alive after a drain, and a pod stuck
 * in Terminating until Kubernetes kills it; so exit anyway after EXIT_GRACE_MS. The timer is
 * unref'd: it never delays an exit that happens by itself.
 */
function exitSoon(): void {
  setTimeout(() => {
    console.error(
      `flash-sale: still running ${EXIT_GRACE_MS} ms after the command ended (an open handle); exiting`,
    )
    process.exit()
  }, EXIT_GRACE_MS).unref()
}
