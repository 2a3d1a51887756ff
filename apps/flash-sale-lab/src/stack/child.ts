import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'

let cliPath: string | undefined

/**
 * The service's built CLI (`flash-sale serve | worker | migrate | reconcile`), found through the
 * package's `./cli` export, never by a path into apps/flash-sale. Node's resolver, not the
 * bundler's: the child runs the built JavaScript also when this module is run from source.
 * Resolved on first use, since it throws MODULE_NOT_FOUND until the service is built.
 */
export function serviceCliPath(): string {
  cliPath ??= createRequire(import.meta.url).resolve('@kunci/flash-sale/cli')
  return cliPath
}

export interface StackProcessOptions {
  /** In logs and echoed output: 'service', 'worker', 'solo'. */
  name: string
  /** The CLI's arguments (`serve --instances 2`). */
  args: string[]
  /** Added to this process's environment. */
  env: Record<string, string>
  /** Echo the output on stderr, each line prefixed with the name. @defaultValue false */
  echo?: boolean
  /**
   * Run as this user (child_process.spawn's uid/gid; the caller must be root), so iptables can
   * single the process out with `-m owner --uid-owner`. @defaultValue this process's user
   */
  user?: { uid: number; gid?: number } | undefined
}

/**
 * A service or worker process of the local stack: started with the stack's environment, killable
 * (kill -9, for chaos) and restartable with the same arguments; stopped with SIGTERM (drain), then
 * SIGKILL after a grace period.
 */
export class StackProcess {
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  readonly output: string[] = []
  /**
   * The lines of the output that are not a request's info or warning log (a crash's stack, a
   * primary's "instance exited", errors), each with the time it arrived: kept apart from
   * `output`, whose last chunks a flood of warnings replaces within seconds. The last 200.
   */
  readonly notable: string[] = []
  readonly name: string
  readonly args: string[]
  readonly env: Record<string, string>
  readonly echo: boolean
  readonly user: { uid: number; gid?: number } | undefined

  constructor(options: StackProcessOptions) {
    this.name = options.name
    this.args = options.args
    this.env = options.env
    this.echo = options.echo ?? false
    this.user = options.user
  }

  get pid(): number | undefined {
    return this.#child?.pid
  }
  /** The exit code of the last run (null while running or if it was killed by a signal). */
  get exitCode(): number | null {
    return this.#child?.exitCode ?? null
  }
  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null
  }

  start(): void {
    const child = spawn(process.execPath, [serviceCliPath(), ...this.args], {
      env: { ...process.env, ...this.env, FLASH_SALE_EXIT_WITH_PARENT: '1' },
      // The IPC channel tells the child when this process is gone, even by SIGKILL (see main.ts).
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      // gid defaults to the uid's number: nobody is 65534:65534, and root's group would be kept otherwise.
      ...(this.user && { uid: this.user.uid, gid: this.user.gid ?? this.user.uid }),
    })
    this.#child = child
    this.#exited = new Promise((resolve) => {
      child.once('exit', () => resolve())
      // Not spawned at all (EPERM for a uid without root, ENOENT): no 'exit' follows.
      child.once('error', (err) => {
        this.output.push(`${this.name}: ${err.message}\n`)
        resolve()
      })
    })
    const keep = (chunk: Buffer) => {
      const text = chunk.toString()
      this.output.push(text)
      if (this.output.length > 200) this.output.shift()
      for (const line of text.split('\n')) {
        if (line.trim() === '' || /^\{"level":(10|20|30|40),/.test(line)) continue
        this.notable.push(`${new Date().toISOString()} ${line.slice(0, 2_000)}`)
        if (this.notable.length > 200) this.notable.shift()
      }
      if (this.echo) process.stderr.write(text.replace(/^(?=.)/gm, `[${this.name}] `))
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
  }

  /** kill -9 and wait for the exit. */
  async kill(): Promise<void> {
    if (!this.running) return
    this.#child?.kill('SIGKILL')
    await this.#exited
  }

  async restart(): Promise<void> {
    await this.kill()
    this.start()
  }

  /** SIGTERM (the process drains), SIGKILL after graceMs. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.running) return
    this.#child?.kill('SIGTERM')
    const timer = setTimeout(() => this.#child?.kill('SIGKILL'), graceMs)
    await this.#exited
    clearTimeout(timer)
  }

  signal(sig: NodeJS.Signals): void {
    this.#child?.kill(sig)
  }
}
