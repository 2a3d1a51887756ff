// `flash-sale-lab load`: drives POST /v1/checkout with k6-style ramping VUs and writes the result
// as JSON for the HTML report. Exit codes: 0 done, 1 no request got an HTTP answer, 2 bad options.
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { parseDuration } from '@kunci/topology'
import { crowdFigures, formatCrowd } from '../load/crowd-figures.js'
import { LoadError, LoadOptionError, TargetUnreachableError } from '../load/errors.js'
import { DEFAULT_LOAD_OPTIONS, type LoadOptions } from '../load/load-options.js'
import { formatProgress } from '../load/progress.js'
import type { LoadResult } from '../load/result.js'
import { runLoad } from '../load/run-load.js'
import { parseStages } from '../load/stages.js'

const HELP = `flash-sale-lab load [options]

  --url <url>             service base URL                    (default ${DEFAULT_LOAD_OPTIONS.url})
  --stages <list>         k6-style ramp 'duration:vus,...'     (default 30s:100,1m:500,30s:0)
  --product <id>          product_id to buy                    (default ${DEFAULT_LOAD_OPTIONS.productId})
  --users <min-max>       user_id range, uniform               (default ${DEFAULT_LOAD_OPTIONS.userIdMin}-${DEFAULT_LOAD_OPTIONS.userIdMax})
  --think <duration>      pause between a VU's purchases       (default ${DEFAULT_LOAD_OPTIONS.thinkTimeMs}ms)
  --repeat <ratio>        share of users retrying after 429/503/timeout (default ${DEFAULT_LOAD_OPTIONS.repeatRatio})
  --max-retries <n|inf>   retries per purchase; inf: until answered (default ${DEFAULT_LOAD_OPTIONS.maxRetries})
  --retry-delay <min-max> pause before a retry instead of --think, e.g. 100ms-300ms
  --double-click <ratio>  share of purchases sent twice at once (default ${DEFAULT_LOAD_OPTIONS.doubleClickRatio})
  --no-idempotency-keys   send no Idempotency-Key header
  --duration <duration>   cap on the run's length              (default: the stages' length)
  --timeout <duration>    per-request timeout                  (default ${DEFAULT_LOAD_OPTIONS.timeoutMs}ms)
  --crowd                 one user per VU (ids from the --users minimum, in arrival order), who checks
                          out until a final answer and leaves; the stages give the arrivals
  --waiting-room          the same crowd through the sale's waiting room: join, poll, check out with
                          the ticket once admitted
  --poll <min-max>        with --waiting-room: poll_after_seconds kept within     (default 1s-10s)
  --patience <duration>   crowd modes: a user without a final answer gives up     (default ${DEFAULT_LOAD_OPTIONS.patienceMs / 1000}s)
  --json <file>           write the full result (time series, orders) as JSON
  --quiet                 no progress line
  -h, --help

Durations: 500ms, 20s, 1m, 1m30s. Examples:
  flash-sale-lab load --stages 10s:50,20s:200,10s:0 --double-click 0.1 --json load.json
  flash-sale-lab load --stages 1s:200,30s:200 --repeat 1 --max-retries inf --retry-delay 100ms-300ms
                                                # the retry storm of a sold-out sale
  flash-sale-lab load --waiting-room --stages 5s:500 --users 1-500 --poll 500ms-2s --json room.json`

function num(option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isFinite(n))
    throw new LoadOptionError(option, `expected a number, got '${value}'`)
  return n
}

function ms(option: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  try {
    return parseDuration(value)
  } catch {
    throw new LoadOptionError(option, `expected a duration like 500ms, 20s or 1m, got '${value}'`)
  }
}

function userRange(value: string | undefined): Pick<LoadOptions, 'userIdMin' | 'userIdMax'> {
  if (value === undefined) return {}
  const m = /^(\d+)-(\d+)$/.exec(value.trim())
  if (!m) throw new LoadOptionError('--users', `expected 'min-max' like 1-99999, got '${value}'`)
  return { userIdMin: Number(m[1]), userIdMax: Number(m[2]) }
}

function msRange(option: string, value: string | undefined): [number, number] | undefined {
  if (value === undefined) return undefined
  const [min, max, ...rest] = value.split('-')
  if (rest.length > 0 || min === undefined || max === undefined)
    throw new LoadOptionError(option, `expected 'min-max' like 100ms-300ms, got '${value}'`)
  return [ms(option, min)!, ms(option, max)!]
}

/** argv → LoadOptions; throws LoadOptionError. Exported for tests. */
export function parseLoadArgs(argv: string[]): {
  options: LoadOptions
  json?: string
  quiet: boolean
  help: boolean
} {
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(argv)
  } catch (err) {
    throw new LoadOptionError('arguments', `${(err as Error).message}; see --help`)
  }
  const v = parsed.values
  const options: LoadOptions = {
    ...(v.url === undefined ? {} : { url: v.url }),
    ...(v.stages === undefined ? {} : { stages: parseStages(v.stages) }),
    ...userRange(v.users),
  }
  const set = <K extends keyof LoadOptions>(key: K, value: LoadOptions[K] | undefined) => {
    if (value !== undefined) options[key] = value
  }
  set('productId', num('--product', v.product))
  set('thinkTimeMs', ms('--think', v.think))
  set('repeatRatio', num('--repeat', v.repeat))
  set(
    'maxRetries',
    v['max-retries'] === 'inf' ? Number.POSITIVE_INFINITY : num('--max-retries', v['max-retries']),
  )
  set('retryDelayMs', msRange('--retry-delay', v['retry-delay']))
  set('doubleClickRatio', num('--double-click', v['double-click']))
  set('maxDurationMs', ms('--duration', v.duration))
  set('timeoutMs', ms('--timeout', v.timeout))
  if (v['no-idempotency-keys']) options.idempotencyKeys = false
  if (v.crowd && v['waiting-room'])
    throw new LoadOptionError('--waiting-room', 'choose one of --crowd and --waiting-room')
  if (v.crowd) options.mode = 'crowd'
  if (v['waiting-room']) options.mode = 'waiting-room'
  set('pollIntervalMs', msRange('--poll', v.poll))
  set('patienceMs', ms('--patience', v.patience))
  return { options, ...(v.json === undefined ? {} : { json: v.json }), quiet: v.quiet, help: v.help }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      url: { type: 'string' },
      stages: { type: 'string' },
      product: { type: 'string' },
      users: { type: 'string' },
      think: { type: 'string' },
      repeat: { type: 'string' },
      'max-retries': { type: 'string' },
      'retry-delay': { type: 'string' },
      'double-click': { type: 'string' },
      'no-idempotency-keys': { type: 'boolean', default: false },
      duration: { type: 'string' },
      timeout: { type: 'string' },
      crowd: { type: 'boolean', default: false },
      'waiting-room': { type: 'boolean', default: false },
      poll: { type: 'string' },
      patience: { type: 'string' },
      json: { type: 'string' },
      quiet: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
}

export function formatSummary(r: LoadResult): string {
  const codes = Object.entries(r.totals.byStatus)
    .map(([c, n]) => `${c}:${n}`)
    .join(' ')
  const errorCodes = Object.entries(r.totals.byErrorCode)
    .map(([c, n]) => `${c}:${n}`)
    .join(' ')
  const transport = Object.entries(r.totals.transportErrors)
    .map(([c, n]) => `${c}:${n}`)
    .join(' ')
  const l = r.latency
  return [
    `${r.totals.requests} requests in ${(r.durationMs / 1000).toFixed(1)} s (${r.stopReason}), ${r.totals.requestsPerSecond} answers/s`,
    `  status      ${codes || '-'}`,
    `  error code  ${errorCodes || '-'}`,
    `  transport   ${transport || '-'}`,
    `  latency ms  p50 ${l.p50Ms}  p90 ${l.p90Ms}  p99 ${l.p99Ms}  max ${l.maxMs}`,
    `  purchases ${r.totals.purchases}, double clicks ${r.totals.doubleClicks}, retries ${r.totals.retries}, orders ${r.orders.length}`,
    ...(r.users.length > 0 ? [formatCrowd(crowdFigures(r.users))] : []),
  ].join('\n')
}

export const loadCommand = {
  name: 'load',
  summary:
    'drive POST /v1/checkout with k6-style ramping virtual users, or a crowd through the waiting room; JSON for the report',
  async run(argv: string[]): Promise<number> {
    let args: ReturnType<typeof parseLoadArgs>
    try {
      args = parseLoadArgs(argv)
    } catch (err) {
      if (!(err instanceof LoadError)) throw err
      process.stderr.write(`flash-sale-lab load: ${err.message}\n`)
      return 2
    }
    if (args.help) {
      process.stdout.write(`${HELP}\n`)
      return 0
    }
    const controller = new AbortController()
    const onSigint = () => controller.abort()
    process.on('SIGINT', onSigint)
    const tty = process.stderr.isTTY && !args.quiet
    let result: LoadResult
    try {
      result = await runLoad(args.options, {
        signal: controller.signal,
        onSecond: (s) => tty && process.stderr.write(`\r\x1b[2K${formatProgress(s)}`),
      })
    } catch (err) {
      if (!(err instanceof LoadError)) throw err
      process.stderr.write(`flash-sale-lab load: ${err.message}\n`)
      return 2
    } finally {
      process.off('SIGINT', onSigint)
      if (tty) process.stderr.write('\n')
    }
    if (args.json !== undefined) await writeFile(args.json, `${JSON.stringify(result)}\n`)
    process.stdout.write(`${formatSummary(result)}\n`)
    if (result.totals.requests > 0 && result.totals.answered === 0) {
      const err = new TargetUnreachableError(result.options.url, result.totals.transportErrors)
      process.stderr.write(`flash-sale-lab load: ${err.message}\n`)
      return 1
    }
    return 0
  },
}

export default loadCommand
