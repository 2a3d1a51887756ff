#!/usr/bin/env node
import type { Command } from './command.js'
import { demoCommand } from './demo.js'
import { loadCommand } from './load.js'
import { migrateCommand } from './migrate.js'
import { reconcileCommand } from './reconcile.js'
import { serveCommand } from './serve.js'
import { upCommand } from './up.js'
import { workerCommand } from './worker.js'

const COMMANDS: Command[] = [
  upCommand,
  serveCommand,
  workerCommand,
  migrateCommand,
  reconcileCommand,
  loadCommand,
  demoCommand,
]

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length))
  return [
    'usage: flash-sale <command> [flags]   (flash-sale <command> --help for its flags)',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
  ].join('\n')
}

// Started by a local stack (`up`, the demo, tests): when that process goes away, even by SIGKILL,
// its IPC channel closes and this process drains and stops instead of lingering.
if (process.env.FLASH_SALE_EXIT_WITH_PARENT === '1' && process.channel) {
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'))
  process.channel.unref()
}

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
    },
    (err: unknown) => {
      console.error(`flash-sale ${command.name}: ${(err as Error)?.stack ?? err}`)
      process.exitCode = 1
    },
  )
}
