// The service's own commands, forwarded to its CLI (`flash-sale`, the package's `./cli` export)
// so that one entry point (`npm run sale -- <command>`) runs the tools and the service alike.
import { spawn } from 'node:child_process'
import { constants } from 'node:os'
import type { Command } from '@kunci/flash-sale'
import { serviceCliPath } from '../stack/child.js'

/**
 * Runs `flash-sale <args>` as a child on this terminal (stdin, stdout, stderr) and resolves with
 * its exit code (128 + the signal's number if a signal ended it). Signals: a Ctrl-C's SIGINT
 * reaches the child directly (same process group), so this process only waits for it to drain;
 * passing it on as well would be a second SIGINT, which stops the service mid-drain. SIGTERM is
 * passed on. Over the IPC channel the child also stops if this process dies, even by SIGKILL
 * (FLASH_SALE_EXIT_WITH_PARENT, as for the local stack's processes).
 */
export function runServiceCli(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [serviceCliPath(), ...args], {
      env: { ...process.env, FLASH_SALE_EXIT_WITH_PARENT: '1' },
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    })
    const wait = () => {}
    const relay = () => child.kill('SIGTERM')
    process.on('SIGINT', wait)
    process.on('SIGTERM', relay)
    const done = () => {
      process.off('SIGINT', wait)
      process.off('SIGTERM', relay)
    }
    child.once('error', (err) => {
      done()
      reject(err)
    })
    child.once('exit', (code, signal) => {
      done()
      resolve(code ?? 128 + (signal ? constants.signals[signal] : 0))
    })
  })
}

function forwarded(name: string, summary: string): Command {
  return { name, summary, run: (argv) => runServiceCli([name, ...argv]) }
}

/** The service's commands, with the summaries its own CLI prints (`flash-sale --help`). */
export const SERVICE_COMMANDS: readonly Command[] = Object.freeze([
  forwarded('serve', 'run the checkout HTTP service (configured by environment; see docs/flash-sale.md)'),
  forwarded('worker', 'persist orders from the sales streams to SQL (exactly once), until SIGTERM'),
  forwarded('migrate', 'apply the SQL migrations (DATABASE_URL or --database-url)'),
  forwarded('reconcile', 'compare Redis (reserved) with SQL (persisted, charged); exit 1 on any drift'),
])
