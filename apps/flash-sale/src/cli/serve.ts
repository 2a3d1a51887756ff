import { serve } from '../server.js'
import type { Command } from './command.js'
import { configFromArgs } from './env-flags.js'

export const serveCommand: Command = {
  name: 'serve',
  summary: 'run the checkout HTTP service (configured by environment; see docs/flash-sale.md)',
  async run(argv) {
    const parsed = configFromArgs('serve', argv, {
      instances: { type: 'string' },
      'metrics-port': { type: 'string' },
    })
    if (!parsed) return 2
    const instances = Number(parsed.values.instances ?? 1)
    if (!Number.isInteger(instances) || instances < 1 || instances > 64) {
      console.error('flash-sale serve: --instances: an integer from 1 to 64')
      return 2
    }
    const mp = parsed.values['metrics-port']
    await serve(parsed.config, { instances, metricsPort: mp === undefined ? undefined : Number(mp) })
    return 0
  },
}
