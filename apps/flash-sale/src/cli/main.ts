#!/usr/bin/env node
import { type Command, dispatch } from './command.js'
import { migrateCommand } from './migrate.js'
import { reconcileCommand } from './reconcile.js'
import { serveCommand } from './serve.js'
import { workerCommand } from './worker.js'

// What ships: the service, its worker and their operations. The tools that drive it (up, load,
// demo) are the lab's CLI, apps/flash-sale-lab.
const COMMANDS: Command[] = [serveCommand, workerCommand, migrateCommand, reconcileCommand]

// Started by a local stack (`flash-sale-lab up`, the demo, tests) or by the lab's CLI: when that
// process goes away, even by SIGKILL, its IPC channel closes and this one drains and stops.
if (process.env.FLASH_SALE_EXIT_WITH_PARENT === '1' && process.channel) {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'))
  process.channel.unref()
}

const EXIT_GRACE_MS = 2_000

process.exitCode = await dispatch('flash-sale', COMMANDS, process.argv.slice(2))
exitSoon()

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
