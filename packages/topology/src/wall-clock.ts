/**
 * A wall clock that a test can step while redis-server runs, as NTP steps a real host's clock:
 * CLOCK_REALTIME, gettimeofday() and time() move; the monotonic clocks do not.
 *
 * It is native/wall-clock.c, built once per machine into the temp dir with gcc and preloaded
 * into redis-server (LD_PRELOAD). libfaketime cannot do it: Debian's redis-server links
 * jemalloc, and the two deadlock at start-up (see the C file). The offset lives in one file per
 * node outside its data dir, so it survives an empty restart, like a host's clock.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { WallClockUnavailableError } from './errors.js'

const SOURCE = new URL('../native/wall-clock.c', import.meta.url)

let built: string | undefined

/** Path of the preload library, built on first use (gcc; scripts/ensure-tools.mjs installs it). */
export function wallClockLibrary(): string {
  if (built) return built
  if (process.platform !== 'linux') {
    throw new WallClockUnavailableError(
      `a steppable wall clock needs Linux (LD_PRELOAD), not ${process.platform}`,
    )
  }
  const source = readFileSync(SOURCE, 'utf8')
  const hash = createHash('sha256').update(source).digest('hex').slice(0, 12)
  const lib = join(tmpdir(), `kunci-topology-wall-clock-${hash}.so`)
  if (!existsSync(lib)) {
    // Built beside its final name and renamed, so parallel test files never load half a file.
    const partial = `${lib}.${process.pid}.tmp`
    try {
      execFileSync('gcc', ['-O2', '-shared', '-fPIC', '-o', partial, '-x', 'c', '-'], {
        input: source,
        stdio: ['pipe', 'ignore', 'pipe'],
      })
    } catch (err) {
      throw new WallClockUnavailableError(
        'cannot build the wall-clock shim with gcc (run `node scripts/ensure-tools.mjs gcc`)',
        { cause: err },
      )
    }
    renameSync(partial, lib)
  }
  built = lib
  return lib
}

/** The environment that gives redis-server the wall clock whose offset is in `offsetFile`. */
export function wallClockEnv(offsetFile: string): Record<string, string> {
  if (!existsSync(offsetFile)) writeFileSync(offsetFile, '0\n')
  return { LD_PRELOAD: wallClockLibrary(), KUNCI_WALL_CLOCK_FILE: offsetFile }
}

/** Sets the offset (ms, may be negative) of a running or future redis-server's wall clock. */
export function setWallClockOffset(offsetFile: string, offsetMs: number): void {
  if (!Number.isSafeInteger(offsetMs))
    throw new RangeError(`offsetMs must be a safe integer, got ${offsetMs}`)
  // Renamed over the old file: the shim reads either the old value or the new one, never a
  // truncated file.
  const next = `${offsetFile}.next`
  writeFileSync(next, `${offsetMs}\n`)
  renameSync(next, offsetFile)
}
