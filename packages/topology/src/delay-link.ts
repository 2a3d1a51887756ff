/**
 * Links with a round trip: a TCP forwarder in front of each target that holds every byte on its
 * way to the target for a fixed delay, to the microsecond (native/delay-link.c, a process of its
 * own). topology's FaultProxy can delay too, but on libuv's whole milliseconds: a 1 ms delay is
 * 1–2 ms depending on where in the millisecond a chunk arrives, which is noise larger than what a
 * benchmark on such links wants to see. The way back is not delayed, so a round trip through a
 * link gains `delayMs` (plus the forwarder's wake-up, tens of µs).
 *
 * Needs Linux and gcc (scripts/ensure-tools.mjs installs gcc).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { lineReader } from './child-lines.js'
import { DelayLinkUnavailableError, InvalidOptionError } from './errors.js'
import { buildNative } from './native-build.js'
import { trackServer, untrackServer } from './reaper.js'

export interface DelayLinkTarget {
  host: string
  port: number
  /** Added to every round trip through this link, in ms (fractions allowed, ≤ 10 000). */
  delayMs: number
}

export interface DelayLinks {
  /** The port on 127.0.0.1 that leads to each target, in the order given. */
  readonly ports: readonly number[]
  /** The forwarder's process. */
  readonly pid: number | undefined
  /** Stops the forwarder; its connections close. */
  stop(): Promise<void>
}

/** Starts one forwarding process with a link per target; resolves once every port listens. */
export async function startDelayLinks(targets: readonly DelayLinkTarget[]): Promise<DelayLinks> {
  if (targets.length === 0) throw new InvalidOptionError('targets', 'give at least one target')
  for (const t of targets) {
    if (!(Number.isFinite(t.delayMs) && t.delayMs >= 0 && t.delayMs <= 10_000))
      throw new InvalidOptionError('delayMs', `must be a number of ms in [0, 10000], got ${t.delayMs}`)
  }
  if (process.platform !== 'linux')
    throw new DelayLinkUnavailableError(`delay links need Linux (epoll, timerfd), not ${process.platform}`)
  const binary = buildNative('delay-link', 'executable', (m, o) => new DelayLinkUnavailableError(m, o))
  const args = targets.flatMap((t) => [t.host, String(t.port), String(Math.round(t.delayMs * 1000))])
  // stdin is a pipe: the forwarder exits when it closes, so it never outlives its owner.
  const child: ChildProcess = spawn(binary, args, { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  if (child.pid !== undefined) trackServer(child.pid)
  const stop = async () => {
    if (child.pid !== undefined) untrackServer(child.pid)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  }
  try {
    const line = await lineReader(child)()
    const ready = JSON.parse(line) as { ready?: boolean; ports?: number[] }
    if (ready.ready !== true || ready.ports?.length !== targets.length)
      throw new Error(`unexpected first line: ${line}`)
    return { ports: ready.ports, pid: child.pid, stop }
  } catch (err) {
    await stop()
    throw new DelayLinkUnavailableError(`the delay links did not start: ${stderr.trim() || String(err)}`, {
      cause: err,
    })
  }
}
