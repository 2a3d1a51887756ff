import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { closeSync, copyFileSync, mkdirSync, openSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { findFreePort, trackChildProcess, untrackChildProcess } from '@kunci/topology'
import { LabError } from '../errors.js'

/**
 * Prometheus and one redis_exporter per Redis node (Debian packages `prometheus` and
 * `prometheus-redis-exporter`), scraping a local stack, with the alert rules of
 * deploy/prometheus/alerts.yml loaded so alerts can be watched firing while nodes are killed.
 */
export interface ObservedRedis {
  /** host:port */
  addr: string
  username?: string
  password?: string
  /** The node speaks TLS only: the exporter connects with rediss:// and trusts this CA (PEM file). */
  tlsCaFile?: string
  /** Prometheus job of this node's exporter: 'redis-redlock' or 'redis-cluster' make the alerts apply. @defaultValue 'redis' */
  job?: string
}

export interface ObservabilityOptions {
  /** Working directory: config, TSDB and logs go here (created if missing). */
  dir: string
  /** host:port of service instances serving /metrics. */
  serviceTargets: string[]
  /** host:port of worker instances serving /metrics. */
  workerTargets: string[]
  redis: ObservedRedis[]
  /** Alert rules to load. @defaultValue deploy/prometheus/alerts.yml of this repository */
  rulesFile?: string
  /** Scrape and rule evaluation interval; short so a demo shows changes within seconds. @defaultValue 2 */
  scrapeIntervalSeconds?: number
  /** How long to wait for each process to answer. @defaultValue 30000 */
  startTimeoutMs?: number
}

export interface Observability {
  prometheusUrl: string
  exporterUrls: string[]
  /** Process ids of everything started (Prometheus last), for diagnostics and tests. */
  readonly pids: number[]
  /** Stops every process (SIGTERM, SIGKILL after 5 s). Safe to call twice. */
  stop(): Promise<void>
}

export const DEFAULT_OBSERVABILITY_OPTIONS = Object.freeze({
  rulesFile: fileURLToPath(new URL('../../../../deploy/prometheus/alerts.yml', import.meta.url)),
  scrapeIntervalSeconds: 2,
  startTimeoutMs: 30_000,
})

export type ObservabilityErrorCode = 'E_OBSERVE_TOOL_MISSING' | 'E_OBSERVE_START_TIMEOUT' | 'E_OBSERVE_EXITED'

export class ObservabilityError extends LabError<ObservabilityErrorCode> {
  constructor(
    readonly code: ObservabilityErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

const STOP_GRACE_MS = 5_000
const live = new Set<ChildProcess>()
let exitHookInstalled = false

/** Kills what is still running when the process exits without calling stop() (Ctrl-C, crash). */
function installExitHook(): void {
  if (exitHookInstalled) return
  exitHookInstalled = true
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL')
  })
}

function start(cmd: string, args: string[], logFile: string, env: NodeJS.ProcessEnv = {}): ChildProcess {
  const log = openSync(logFile, 'a')
  try {
    const child = spawn(cmd, args, { stdio: ['ignore', log, log], env: { ...process.env, ...env } })
    live.add(child)
    // The same watchdog as the Redis nodes': if this process is SIGKILLed (a test runner giving up
    // on a hung hook), no 'exit' handler runs, and the exporters and Prometheus would live on.
    const pid = child.pid
    if (pid !== undefined) trackChildProcess(pid)
    const gone = () => {
      live.delete(child)
      if (pid !== undefined) untrackChildProcess(pid)
    }
    child.once('exit', gone)
    child.once('error', gone)
    return child
  } finally {
    closeSync(log)
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS)
  try {
    await exited
  } finally {
    clearTimeout(timer)
  }
}

/** Resolves once `url` answers 200, rejects if the process exits or the deadline passes. */
async function waitForHttp(url: string, child: ChildProcess, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let spawnError: Error | undefined
  child.once('error', (err) => {
    spawnError = err
  })
  for (;;) {
    if (spawnError) {
      const missing = (spawnError as NodeJS.ErrnoException).code === 'ENOENT'
      throw new ObservabilityError(
        missing ? 'E_OBSERVE_TOOL_MISSING' : 'E_OBSERVE_EXITED',
        missing
          ? `${what} is not installed: run \`node scripts/ensure-tools.mjs prometheus redis_exporter\` (Debian packages prometheus, prometheus-redis-exporter).`
          : `${what} could not start: ${spawnError.message}`,
        { cause: spawnError },
      )
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new ObservabilityError(
        'E_OBSERVE_EXITED',
        `${what} exited (${child.exitCode ?? child.signalCode}); see its log.`,
      )
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) })
      await res.arrayBuffer()
      if (res.ok) return
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new ObservabilityError(
        'E_OBSERVE_START_TIMEOUT',
        `${what} did not answer ${url} within ${timeoutMs} ms; see its log.`,
      )
    }
    await new Promise((r) => setTimeout(r, 100))
  }
}

function yamlList(items: string[]): string {
  return `[${items.map((i) => JSON.stringify(i)).join(', ')}]`
}

export function prometheusConfig(input: {
  scrapeIntervalSeconds: number
  rulesFile: string
  serviceTargets: string[]
  workerTargets: string[]
  exporters: { job: string; target: string; redisAddr: string }[]
}): string {
  const i = `${input.scrapeIntervalSeconds}s`
  const lines = [
    'global:',
    `  scrape_interval: ${i}`,
    `  evaluation_interval: ${i}`,
    `rule_files: [${JSON.stringify(input.rulesFile)}]`,
    'scrape_configs:',
  ]
  const job = (name: string, targets: string[]) => {
    if (targets.length > 0)
      lines.push(
        `  - job_name: ${JSON.stringify(name)}`,
        `    static_configs: [{ targets: ${yamlList(targets)} }]`,
      )
  }
  job('flash-sale', input.serviceTargets)
  job('flash-sale-worker', input.workerTargets)
  const jobs = new Map<string, { target: string; redisAddr: string }[]>()
  for (const e of input.exporters) jobs.set(e.job, [...(jobs.get(e.job) ?? []), e])
  for (const [name, exporters] of jobs) {
    lines.push(`  - job_name: ${JSON.stringify(name)}`, '    static_configs:')
    // instance = the Redis address, not the exporter's, so alerts name the node.
    for (const e of exporters) {
      lines.push(
        `      - targets: [${JSON.stringify(e.target)}]`,
        `        labels: { instance: ${JSON.stringify(e.redisAddr)} }`,
      )
    }
  }
  return `${lines.join('\n')}\n`
}

export async function startObservability(options: ObservabilityOptions): Promise<Observability> {
  const o = { ...DEFAULT_OBSERVABILITY_OPTIONS, ...options }
  const dir = resolve(o.dir)
  mkdirSync(join(dir, 'data'), { recursive: true })
  installExitHook()
  const children: ChildProcess[] = []
  let stopping: Promise<void> | undefined
  const stop = () =>
    (stopping ??= (async () => {
      // Prometheus first, so it does not record the exporters going away as targets down.
      for (const child of [...children].reverse()) await stopChild(child)
    })())
  try {
    const exporters: { job: string; target: string; redisAddr: string }[] = []
    for (const [n, r] of o.redis.entries()) {
      const port = await findFreePort()
      const target = `127.0.0.1:${port}`
      const env: NodeJS.ProcessEnv = {}
      // Credentials through the environment, never argv (visible to every user in `ps`).
      if (r.username) env.REDIS_USER = r.username
      if (r.password) env.REDIS_PASSWORD = r.password
      const redisArgs = r.tlsCaFile
        ? [`--redis.addr=rediss://${r.addr}`, `--tls-ca-cert-file=${r.tlsCaFile}`]
        : [`--redis.addr=redis://${r.addr}`]
      const child = start(
        'prometheus-redis-exporter',
        [...redisArgs, `--web.listen-address=${target}`],
        join(dir, `redis-exporter-${n}.log`),
        env,
      )
      children.push(child)
      await waitForHttp(`http://${target}/metrics`, child, 'prometheus-redis-exporter', o.startTimeoutMs)
      exporters.push({ job: r.job ?? 'redis', target, redisAddr: r.addr })
    }
    const rulesFile = join(dir, 'alerts.yml')
    copyFileSync(o.rulesFile, rulesFile)
    const configFile = join(dir, 'prometheus.yml')
    writeFileSync(
      configFile,
      prometheusConfig({
        scrapeIntervalSeconds: o.scrapeIntervalSeconds,
        rulesFile,
        serviceTargets: o.serviceTargets,
        workerTargets: o.workerTargets,
        exporters,
      }),
    )
    const port = await findFreePort()
    const prometheusUrl = `http://127.0.0.1:${port}`
    const prometheus = start(
      'prometheus',
      [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        '--storage.tsdb.retention.time=1d',
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      join(dir, 'prometheus.log'),
    )
    children.push(prometheus)
    await waitForHttp(`${prometheusUrl}/-/ready`, prometheus, 'prometheus', o.startTimeoutMs)
    return {
      prometheusUrl,
      exporterUrls: exporters.map((e) => `http://${e.target}/metrics`),
      pids: children.flatMap((c) => (c.pid === undefined ? [] : [c.pid])),
      stop,
    }
  } catch (err) {
    await stop()
    throw err
  }
}
