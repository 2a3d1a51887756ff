#!/usr/bin/env node
// `flash-sale-lab`: the tools that drive the service (up, load, demo); the service's own commands
// (serve, worker, migrate, reconcile) are passed on to its CLI, `flash-sale`.
import type { Command } from './command.js'
import { demoCommand } from './demo.js'
import { loadCommand } from './load.js'
import { SERVICE_COMMANDS } from './service.js'
import { upCommand } from './up.js'

const COMMANDS: Command[] = [upCommand, ...SERVICE_COMMANDS, loadCommand, demoCommand]

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length))
  return [
    'usage: flash-sale-lab <command> [flags]   (flash-sale-lab <command> --help for its flags)',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
  ].join('\n')
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
      console.error(`flash-sale-lab ${command.name}: ${(err as Error)?.stack ?? err}`)
      process.exitCode = 1
    },
  )
}
