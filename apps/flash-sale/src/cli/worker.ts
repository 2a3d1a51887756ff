import { runWorker } from '../orders/worker-process.js'
import type { Command } from './command.js'
import { configFromArgs } from './env-flags.js'

export const workerCommand: Command = {
  name: 'worker',
  summary: 'persist orders from the sales streams to SQL (exactly once), until SIGTERM',
  async run(argv) {
    const parsed = configFromArgs('worker', argv)
    if (!parsed) return 2
    await runWorker(parsed.config)
    return 0
  },
}
