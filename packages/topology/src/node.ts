import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { nodeCertificate, type TopologyTls } from './certificates.js'
import { InvalidOptionError, NodeStartError, TopologyTimeoutError } from './errors.js'
import { type FindPortOptions, findFreePort, releasePort } from './ports.js'
import type { FaultProxy } from './proxy.js'
import { trackServer, untrackServer } from './reaper.js'
import { type NodeAddress, ping, sendCommands } from './resp.js'
import { setWallClockOffset, wallClockEnv } from './wall-clock.js'

/** One redis-server process that can be killed, stopped, restarted and paused. */
export interface RedisNode {
  /** 'node-0', 'node-1', ... */
  readonly name: string
  /**
   * The address the node listens on and is announced as: '127.0.0.1', or with `distinctHosts`
   * its own loopback address (distinctHost(serverPort), e.g. '127.1.91.4'), which its outgoing
   * connections (replication, cluster bus) also leave from.
   */
  readonly host: string
  /** Where clients connect: the proxy's port when there is a proxy, otherwise serverPort. */
  readonly port: number
  /** redis-server's own port, the same across restarts. */
  readonly serverPort: number
  /** The ACL user to log in as (the admin user with `adminUser`), undefined for the default user. */
  readonly username: string | undefined
  readonly password: string | undefined
  /** The certificates when the node speaks TLS only (its plain TCP port is closed). */
  readonly tls: TopologyTls | undefined
  /** The real redis-server pid, undefined while the node is down. */
  readonly pid: number | undefined
  readonly running: boolean
  readonly dataDir: string
  /** SIGKILL; resolves once the process has exited. */
  kill(): Promise<void>
  /** Graceful shutdown (SIGTERM), SIGKILL after 10 s; resolves once the process has exited. */
  stop(): Promise<void>
  /** Starts again on the same serverPort and waits for PING. `empty` wipes the data dir first. */
  restart(opts?: { empty?: boolean }): Promise<void>
  /** SIGSTOP: the node holds connections open but answers nothing. */
  pause(): void
  /** SIGCONT */
  resume(): void
  /**
   * Steps the node's wall clock to `offsetMs` from the host's (its monotonic clock keeps
   * running true), at once if it runs and from its next start otherwise; the offset survives
   * restarts, like a host's clock. Only for nodes started with `steppableWallClock: true`.
   */
  setWallClockOffset(offsetMs: number): void
  readonly proxy: FaultProxy | undefined
}

export interface ManagedNodeConfig {
  name: string
  serverPort: number
  dataDir: string
  /** How topology logs in (see security.ts). */
  username?: string | undefined
  password: string | undefined
  /** redis.conf lines with secrets (users, passwords), written with mode 0600 instead of argv. @defaultValue [] */
  confLines?: string[]
  /** TLS only: `port 0` and `tls-port <serverPort>`; the other tls-* settings come in args. */
  tls?: TopologyTls | undefined
  /** redis-server arguments besides the ports, --dir, --logfile and confLines. */
  args: string[]
  /** Removed by the watchdog if the owner dies without cleaning up (see reaper.ts). */
  cleanupDir?: string
  /**
   * Bind, send from (`bind-source-addr`) and announce (`cluster-announce-ip`) the node's own
   * loopback address, distinctHost(serverPort), instead of 127.0.0.1. @defaultValue false
   */
  distinctHost?: boolean
  /** Start redis-server with a steppable wall clock whose offset (ms) is in this file (wall-clock.ts). */
  wallClockFile?: string
}

const HOST = '127.0.0.1'

/**
 * The loopback address of a node started with `distinctHosts`: 127.1.<port / 256>.<port % 256>.
 * All of 127/8 is loopback on Linux, so nothing has to be configured; the address is unique
 * because the port is (findFreePort reserves it across processes while its owner lives), and it
 * is never 127.0.0.1, so iptables rules on it can never touch anything else on this machine
 * (the shared Redis on 6379, PostgreSQL). The bus port (port + 10000) shares the node's address.
 */
export function distinctHost(serverPort: number): string {
  if (!Number.isInteger(serverPort) || serverPort < 1 || serverPort > 65_535) {
    throw new RangeError(`expected a TCP port, got ${serverPort}`)
  }
  return `127.1.${serverPort >> 8}.${serverPort & 255}`
}

const START_TIMEOUT_MS = 15_000
const STOP_GRACE_MS = 10_000

/** Thrown internally when redis-server could not bind its port, so the caller can pick another. */
export class AddressInUseError extends NodeStartError {}

/** Signals a pid that may have exited a moment ago (its 'exit' event not yet seen). */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig)
  } catch {
    // already gone
  }
}

export class ManagedNode implements RedisNode {
  readonly name: string
  readonly dataDir: string
  readonly username: string | undefined
  readonly password: string | undefined
  readonly tls: TopologyTls | undefined
  proxy: FaultProxy | undefined
  #serverPort: number
  #config: ManagedNodeConfig
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  #paused = false

  constructor(config: ManagedNodeConfig) {
    this.#config = config
    this.name = config.name
    this.dataDir = config.dataDir
    this.username = config.username
    this.password = config.password
    this.tls = config.tls
    this.#serverPort = config.serverPort
  }

  get serverPort(): number {
    return this.#serverPort
  }
  /** Follows the port: a node moved to another port before its first start moves address too. */
  get host(): string {
    return this.#config.distinctHost ? distinctHost(this.#serverPort) : HOST
  }
  get port(): number {
    return this.proxy?.port ?? this.#serverPort
  }
  get pid(): number | undefined {
    return this.#child?.pid
  }
  get running(): boolean {
    return this.#child !== undefined
  }
  /** SIGSTOPped: running, but it will not answer. */
  get paused(): boolean {
    return this.#paused
  }
  get logFile(): string {
    return join(this.dataDir, 'redis.log')
  }
  /** redis-server itself (not the proxy), logged in as topology's user, over TLS when the node speaks it. */
  get adminAddress(): NodeAddress {
    return {
      host: this.host,
      port: this.#serverPort,
      username: this.username,
      password: this.password,
      tls: this.tls,
    }
  }

  /** Before the first start only: the port was taken, try another one. */
  changeServerPort(port: number): void {
    this.#serverPort = port
  }

  async start(): Promise<void> {
    if (this.#child) return
    mkdirSync(this.dataDir, { recursive: true })
    // Rewritten at every start: restart({ empty: true }) removes the data dir with it.
    const confFile = join(this.dataDir, 'redis.conf')
    writeFileSync(confFile, `${(this.#config.confLines ?? []).join('\n')}\n`, { mode: 0o600 })
    const port = String(this.#serverPort)
    const args = [
      // The config file must come first; argv options are applied after it.
      confFile,
      ...(this.tls ? ['--port', '0', '--tls-port', port] : ['--port', port]),
      '--dir',
      this.dataDir,
      '--logfile',
      this.logFile,
      ...this.#hostArgs(),
      ...this.#config.args,
      ...(await this.#certificateArgs()),
    ]
    const clockFile = this.#config.wallClockFile
    const env = clockFile === undefined ? process.env : { ...process.env, ...wallClockEnv(clockFile) }
    // Logs go to a file: a pipe nobody reads would fill up and block redis-server.
    const child = spawn('redis-server', args, { stdio: 'ignore', detached: true, env })
    const spawned = once(child, 'spawn').then(
      () => true,
      () => false,
    )
    this.#exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        if (child.pid !== undefined) untrackServer(child.pid)
        if (this.#child === child) {
          this.#child = undefined
          this.#paused = false
        }
        resolve()
      })
      child.once('error', () => resolve())
    })
    if (!(await spawned) || child.pid === undefined) {
      throw new NodeStartError(this.name, this.#serverPort, 'could not spawn redis-server (is it on PATH?)')
    }
    this.#child = child
    trackServer(child.pid, this.#config.cleanupDir ?? this.dataDir)
    await this.#waitForPing(child)
  }

  /** Where the node listens, sends from and says it is (before `args`, so a caller's extra args win). */
  #hostArgs(): string[] {
    const host = this.host
    if (!this.#config.distinctHost) return ['--bind', host]
    return [
      '--bind',
      host,
      // Replication and cluster-bus connections leave from the node's address, so a rule on the
      // pair of addresses catches both directions of every link between two nodes.
      '--bind-source-addr',
      host,
      // What CLUSTER SLOTS/SHARDS/NODES tell peers and clients; ignored outside cluster mode.
      '--cluster-announce-ip',
      host,
    ]
  }

  /**
   * With distinctHost and TLS, a certificate for the node's own address (after `args`, whose
   * --tls-cert-file names the shared one): clients check the certificate against the address they
   * dialled, and the shared server certificate names only 127.0.0.1 and localhost.
   */
  async #certificateArgs(): Promise<string[]> {
    if (!this.#config.distinctHost || !this.tls) return []
    const cert = await nodeCertificate(this.tls, join(dirname(this.dataDir), 'tls-nodes'), this.host)
    return ['--tls-cert-file', cert.certFile, '--tls-key-file', cert.keyFile]
  }

  async #waitForPing(child: ChildProcess): Promise<void> {
    const deadline = Date.now() + START_TIMEOUT_MS
    const address = this.adminAddress
    while (Date.now() < deadline) {
      if (this.#child !== child) {
        const log = this.#logTail()
        if (/Address already in use/.test(log)) throw new AddressInUseError(this.name, this.#serverPort, log)
        throw new NodeStartError(this.name, this.#serverPort, log)
      }
      if (await ping(address, 500)) {
        // A PONG proves only that some redis-server listens on the port. Ours may still be
        // failing to bind it while another process's server answers, so ask who answered.
        const pid = await serverPid(address)
        if (pid === child.pid) return
        if (pid !== undefined) {
          await this.kill()
          throw new AddressInUseError(
            this.name,
            this.#serverPort,
            `port ${this.#serverPort} is answered by another redis-server (pid ${pid}), not by ours (pid ${child.pid})`,
          )
        }
      }
      await sleep(50)
    }
    await this.kill()
    throw new NodeStartError(this.name, this.#serverPort, this.#logTail(), {
      cause: new TopologyTimeoutError('PING', START_TIMEOUT_MS),
    })
  }

  #logTail(lines = 15): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
    } catch {
      return '(no log)'
    }
  }

  async kill(): Promise<void> {
    const child = this.#child
    if (!child?.pid) return
    signal(child.pid, 'SIGKILL')
    await this.#exited
  }

  async stop(): Promise<void> {
    const child = this.#child
    if (!child?.pid) return
    const pid = child.pid
    signal(pid, 'SIGTERM')
    // A stopped process only acts on SIGTERM once continued.
    if (this.#paused) signal(pid, 'SIGCONT')
    const timer = setTimeout(() => this.#child === child && signal(pid, 'SIGKILL'), STOP_GRACE_MS)
    await this.#exited
    clearTimeout(timer)
  }

  async restart(opts: { empty?: boolean } = {}): Promise<void> {
    await this.stop()
    if (opts.empty) rmSync(this.dataDir, { recursive: true, force: true })
    await this.start()
  }

  pause(): void {
    if (!this.#child?.pid) return
    signal(this.#child.pid, 'SIGSTOP')
    this.#paused = true
  }

  resume(): void {
    if (!this.#child?.pid) return
    signal(this.#child.pid, 'SIGCONT')
    this.#paused = false
  }

  setWallClockOffset(offsetMs: number): void {
    const file = this.#config.wallClockFile
    if (file === undefined) {
      throw new InvalidOptionError(
        'steppableWallClock',
        `${this.name} was not started with a steppable wall clock`,
      )
    }
    setWallClockOffset(file, offsetMs)
  }

  /** Stops the server and the proxy; the data dir is left to the owner. */
  async dispose(): Promise<void> {
    await this.kill()
    await this.proxy?.close()
    releasePort(this.#serverPort)
  }
}

const MAX_PORT_RETRIES = 5

/**
 * Starts the node, moving it to another free port when redis-server finds its port taken
 * (the port was free when picked, but another process may have bound it since).
 */
export async function startOnFreePort(node: ManagedNode, portOpts: FindPortOptions = {}): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await node.start()
      return
    } catch (err) {
      if (!(err instanceof AddressInUseError) || attempt >= MAX_PORT_RETRIES) throw err
      node.changeServerPort(await findFreePort(portOpts))
    }
  }
}

/** The process_id the server at the address reports in INFO server; undefined when it cannot say. */
async function serverPid(address: NodeAddress): Promise<number | undefined> {
  try {
    const [reply] = await sendCommands(address, [['INFO', 'server']], 1_000)
    const match = typeof reply === 'string' ? /^process_id:(\d+)/m.exec(reply) : null
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}
