import { execFileSync, spawn } from 'node:child_process'
import { rmSync } from 'node:fs'

// Guarantees that no redis-server outlives the process that started it, in two layers:
//
// 1. In-process: 'exit', SIGINT and SIGTERM handlers SIGKILL every tracked server
//    synchronously. This covers test failures, process.exit() and Ctrl-C.
// 2. Out-of-process: each server gets a detached `sh` watchdog that polls the owner pid every
//    200 ms and SIGKILLs the server once the owner is gone. This covers an owner that is itself
//    SIGKILLed (no handler runs) or crashes natively. SIGKILL also works on a SIGSTOPped server.
//
// The watchdog exits as soon as its server does, and is killed when the server is stopped on
// purpose, so it never signals a pid that may have been reused.
const WATCHDOG_SCRIPT = `
owner=$1; child=$2; dir=$3
while kill -0 "$owner" 2>/dev/null; do
  kill -0 "$child" 2>/dev/null || exit 0
  sleep 0.2
done
kill -9 "$child" 2>/dev/null
if [ -n "$dir" ]; then sleep 0.2; rm -rf "$dir"; fi
`

// Resources that are not processes (iptables chains) get a watchdog of their own that waits for
// the owner to be gone and then runs the commands that remove them; in-process, the same commands
// run synchronously on exit.
const CLEANUP_SCRIPT = `
owner=$1; commands=$2
while kill -0 "$owner" 2>/dev/null; do sleep 0.2; done
eval "$commands"
`

interface Tracked {
  pid: number
  watchdogPid: number | undefined
}

const tracked = new Map<number, Tracked>()
const ownedDirs = new Set<string>()
const cleanups = new Map<
  number,
  { commands: readonly (readonly string[])[]; watchdogPid: number | undefined }
>()
let nextCleanup = 0
let handlersInstalled = false

function killQuietly(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

/** SIGKILLs every tracked server and its watchdog and removes owned data dirs, synchronously. */
export function reapAllSync(): void {
  for (const t of tracked.values()) {
    killQuietly(t.pid, 'SIGKILL')
    killQuietly(t.watchdogPid, 'SIGKILL')
  }
  tracked.clear()
  for (const dir of ownedDirs) rmSync(dir, { recursive: true, force: true })
  ownedDirs.clear()
  for (const cleanup of cleanups.values()) {
    killQuietly(cleanup.watchdogPid, 'SIGKILL')
    runQuietlySync(cleanup.commands)
  }
  cleanups.clear()
}

function runQuietlySync(commands: readonly (readonly string[])[]): void {
  for (const [file, ...args] of commands) {
    try {
      execFileSync(file!, args, { stdio: 'ignore', timeout: 10_000 })
    } catch {
      // best effort: the resource may be gone already
    }
  }
}

/** 'a b' → `'a b'`, for the watchdog's shell. */
function shellQuote(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`
}

/**
 * Commands that remove a resource outside any process (an iptables chain), run once this process
 * is gone however it ends: synchronously on exit, SIGINT and SIGTERM, and by a detached watchdog
 * when the process is SIGKILLed. Each command runs even if the one before failed. Returns the
 * function to call once the owner has removed the resource itself (it stops the watchdog).
 */
export function trackCleanup(commands: readonly (readonly string[])[]): () => void {
  installHandlers()
  const id = nextCleanup++
  const script = commands.map((c) => `${c.map(shellQuote).join(' ')} >/dev/null 2>&1`).join('\n')
  const watchdog = spawn('sh', ['-c', CLEANUP_SCRIPT, 'kunci-cleanup', String(process.pid), script], {
    detached: true,
    stdio: 'ignore',
  })
  watchdog.on('error', () => {}) // sh missing: the in-process handlers still apply
  watchdog.unref()
  cleanups.set(id, { commands, watchdogPid: watchdog.pid })
  return () => {
    const cleanup = cleanups.get(id)
    if (!cleanup) return
    cleanups.delete(id)
    killQuietly(cleanup.watchdogPid, 'SIGKILL')
  }
}

function onSignal(signal: NodeJS.Signals): void {
  // Someone else (the CLI, a test runner) listens too: they own the graceful shutdown, and
  // the 'exit' handler still reaps whatever is left when they are done.
  if (process.listenerCount(signal) > 1) return
  reapAllSync()
  process.removeListener(signal, onSignal)
  // Re-raise so the process ends with the usual "killed by signal" status.
  process.kill(process.pid, signal)
}

function installHandlers(): void {
  if (handlersInstalled) return
  handlersInstalled = true
  process.on('exit', reapAllSync)
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
}

/**
 * Starts watching a freshly spawned server (exported as `trackChildProcess` for any helper
 * process a harness starts beside its servers: exporters, Prometheus). `cleanupDir`, when given, is removed by the
 * watchdog after it had to kill the server (the owner is gone and cannot remove it).
 */
export function trackServer(pid: number, cleanupDir?: string): void {
  installHandlers()
  const watchdog = spawn(
    'sh',
    ['-c', WATCHDOG_SCRIPT, 'kunci-watchdog', String(process.pid), String(pid), cleanupDir ?? ''],
    {
      detached: true,
      stdio: 'ignore',
    },
  )
  watchdog.on('error', () => {}) // sh missing: the in-process handlers still apply
  watchdog.unref()
  tracked.set(pid, { pid, watchdogPid: watchdog.pid })
}

/** The server exited (or was stopped on purpose): stop its watchdog. */
export function untrackServer(pid: number): void {
  const t = tracked.get(pid)
  if (!t) return
  tracked.delete(pid)
  killQuietly(t.watchdogPid, 'SIGKILL')
}

/** A temporary directory this process created and must remove even on abrupt exit. */
export function trackOwnedDir(dir: string): void {
  installHandlers()
  ownedDirs.add(dir)
}

export function untrackOwnedDir(dir: string): void {
  ownedDirs.delete(dir)
}
