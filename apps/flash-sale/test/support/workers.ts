import { type ChildProcess, spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { findFreePort } from '@kunci/topology'
import { type LocalStack, serviceCliPath } from './stack-fixture.js'

/**
 * An extra `flash-sale worker` process beside a local stack's (same environment, its own metrics
 * port and extra variables), for tests that need several workers and fault each one on its own:
 * kill -9, SIGSTOP/SIGCONT. Its output is kept, so a test can wait for a line it logs.
 */
export class ExtraWorker {
  readonly output: string[] = []
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()

  private constructor(
    readonly name: string,
    readonly metricsUrl: string,
    readonly env: Record<string, string>,
  ) {}

  static async start(
    stack: LocalStack,
    name: string,
    env: Record<string, string> = {},
  ): Promise<ExtraWorker> {
    const port = await findFreePort()
    const w = new ExtraWorker(name, `http://127.0.0.1:${port}/metrics`, {
      ...stack.env,
      ...env,
      WORKER_PORT: String(port),
    })
    w.#spawn()
    return w
  }

  #spawn(): void {
    const child = spawn(process.execPath, [serviceCliPath(), 'worker'], {
      env: { ...process.env, ...this.env, FLASH_SALE_EXIT_WITH_PARENT: '1' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    })
    this.#child = child
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()))
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line) this.output.push(line)
      if (process.env.FS_ECHO === '1') process.stderr.write(`[${this.name}] ${chunk}`)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
  }

  /** Once its metrics server answers (it listens after it connected to Redis and SQL). */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while (
      !(await fetch(this.metricsUrl).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (!this.running) throw new Error(`worker ${this.name} exited: ${this.output.slice(-5).join('\n')}`)
      if (Date.now() > deadline) throw new Error(`worker ${this.name} not ready within ${timeoutMs} ms`)
      await sleep(100)
    }
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null
  }

  signal(sig: NodeJS.Signals): void {
    this.#child?.kill(sig)
  }

  /** kill -9, and wait for the exit. */
  async kill(): Promise<void> {
    if (!this.running) return
    this.#child?.kill('SIGKILL')
    await this.#exited
  }

  /** SIGCONT (a stopped process cannot drain), SIGTERM, SIGKILL after graceMs. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return
    this.#child?.kill('SIGCONT')
    this.#child?.kill('SIGTERM')
    const timer = setTimeout(() => this.#child?.kill('SIGKILL'), graceMs)
    await this.#exited
    clearTimeout(timer)
  }

  /** The first line from `from` on that matches, or undefined. */
  line(pattern: RegExp, from = 0): RegExpExecArray | undefined {
    for (let i = from; i < this.output.length; i++) {
      const m = pattern.exec(this.output[i]!)
      if (m) return m
    }
    return undefined
  }

  /** A counter or gauge of this worker's /metrics (summed over its label sets that match `labels`). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await (await fetch(this.metricsUrl)).text()
    let sum = 0
    for (const l of text.split('\n')) {
      if (!l.startsWith(`${name}{`) && !l.startsWith(`${name} `)) continue
      if (!Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) continue
      sum += Number(l.slice(l.lastIndexOf(' ') + 1))
    }
    return sum
  }
}
