// `flash-sale-lab demo` (npm run demo): naive, redlock and lua under a ramped crowd and real faults,
// a table per strategy, a verdict and report/index.html. Exit codes: 0 lua and redlock held every
// invariant, 1 one broke (or the run did not finish), 2 bad options, 130 stopped by Ctrl-C.
import { parseArgs } from 'node:util'
import type { Command } from '@kunci/flash-sale'
import { DEFAULT_DEMO_OPTIONS, type DemoOptions } from '../demo/demo-options.js'
import { DemoError, DemoOptionError } from '../demo/errors.js'
import { runDemo } from '../demo/run-demo.js'
import { formatSummary } from '../demo/summary-table.js'

const HELP = `usage: flash-sale-lab demo [--profile quick|default|full] [--strategies naive,redlock,lua]
                           [--database-url postgres://…] [--sql embedded|postgres|auto]
                           [--report-dir ${DEFAULT_DEMO_OPTIONS.reportDir}] [--instances ${DEFAULT_DEMO_OPTIONS.instances}] [--echo]
                           [--phases money,storm-100,…]

Per strategy, a whole local stack (3+3 Redis Cluster, 5 lock nodes, SQL, ${DEFAULT_DEMO_OPTIONS.instances} service processes,
a worker), a sale of 100 units of product 9921, then a larger sale, each under a ramp of many
users with repeats and double clicks while faults hit at fixed moments: kill -9 of the sale's
cluster master (failover), kill -9 of a lock node and its restart, kill -9 of the worker and its
restart, SIGSTOP of a lock node for a second; a retry storm; the same crowd with and without the
waiting room; and money: a sale where some wallets cannot pay (their units return and sell
again) and a sale held until paid (paid, cancelled, expired). Prints a live line each second, a
table per strategy and the verdict; writes <report-dir>/index.html.

  --profile        quick (seconds, for tests), default (about 2 minutes), full (the articles'
                   30s→100, 1m→500, 30s→0 ramp per strategy)
  --phases         only these phases, by id or the start of ids: sale-100, sale-5000
                   (quick: sale-1000), storm-100, crowd (crowd-direct, crowd-room), money
                   (money-instant: funded and short wallets; money-hold: held orders paid,
                   cancelled or left to expire)
  --sql            without --database-url: embedded (default, PGlite), postgres (a fresh
                   database per strategy on postgres://postgres@127.0.0.1:5432, dropped at the
                   end), auto (postgres if it answers, else embedded)
Exit 1 if lua or redlock broke an invariant (naive is expected to oversell).`

export function parseDemoArgs(argv: string[]): { options: DemoOptions; help: boolean } {
  let values: ReturnType<typeof parse>['values']
  try {
    values = parse(argv).values
  } catch (err) {
    throw new DemoOptionError('arguments', `${(err as Error).message}; see --help`)
  }
  const options: DemoOptions = {}
  if (values.profile !== undefined) options.profile = values.profile as DemoOptions['profile'] & string
  if (values.strategies !== undefined)
    options.strategies = values.strategies.split(',').map((x) => x.trim()) as DemoOptions['strategies'] &
      string[]
  if (values['database-url'] !== undefined) options.databaseUrl = values['database-url']
  if (values.sql !== undefined) options.sql = values.sql as DemoOptions['sql'] & string
  if (values['report-dir'] !== undefined) options.reportDir = values['report-dir']
  if (values.instances !== undefined) options.instances = Number(values.instances)
  if (values.echo) options.echo = true
  if (values.phases !== undefined) options.phases = values.phases.split(',').map((x) => x.trim())
  return { options, help: values.help }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      profile: { type: 'string' },
      strategies: { type: 'string' },
      'database-url': { type: 'string' },
      sql: { type: 'string' },
      'report-dir': { type: 'string' },
      instances: { type: 'string' },
      echo: { type: 'boolean', default: false },
      phases: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
}

export const demoCommand: Command = {
  name: 'demo',
  summary:
    'naive vs redlock vs lua under load and kill -9 / SIGSTOP faults; table, verdict, report/index.html',
  async run(argv) {
    let args: ReturnType<typeof parseDemoArgs>
    try {
      args = parseDemoArgs(argv)
    } catch (err) {
      if (!(err instanceof DemoError)) throw err
      console.error(`flash-sale-lab demo: ${err.message}`)
      return 2
    }
    if (args.help) {
      console.log(HELP)
      return 0
    }
    const t0 = Date.now()
    const stamp = () => `[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`
    const controller = new AbortController()
    // `on`, not `once`: @kunci/topology's reaper kills every redis-server and re-raises the signal
    // when it is the only SIGINT listener left. A second Ctrl-C hands over to it: stop at once.
    const onSigint = () => {
      if (controller.signal.aborted) {
        process.off('SIGINT', onSigint)
        process.kill(process.pid, 'SIGINT')
        return
      }
      console.log(`${stamp()} stopping: undoing the faults, stopping the stacks… (Ctrl-C again: at once)`)
      controller.abort()
    }
    process.on('SIGINT', onSigint)
    console.log('kunci flash-sale demo: naive vs redlock vs lua, a ramped crowd, faults injected mid-run\n')
    try {
      const result = await runDemo(args.options, {
        signal: controller.signal,
        log: (line) => console.log(`${stamp()} ${line}`),
        progress: (line) => console.log(`${stamp()}   ${line}`),
      })
      console.log(`\n${formatSummary(result.input)}\n`)
      console.log(`report: ${result.reportFile}`)
      if (result.aborted) return 130
      return result.ok ? 0 : 1
    } catch (err) {
      if (!(err instanceof DemoError)) throw err
      console.error(`flash-sale-lab demo: ${err.message}`)
      return 2
    } finally {
      process.off('SIGINT', onSigint)
    }
  },
}
