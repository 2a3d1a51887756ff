/**
 * A wall clock that a test can step while redis-server runs, as NTP steps a real host's clock:
 * CLOCK_REALTIME, gettimeofday() and time() move; the monotonic clocks do not.
 *
 * It is native/wall-clock.c, built once per machine into the temp dir with gcc and preloaded
 * into redis-server (LD_PRELOAD). libfaketime cannot do it: Debian's redis-server links
 * jemalloc, and the two deadlock at start-up (see the C file). The offset lives in one file per
 * node outside its data dir, so it survives an empty restart, like a host's clock.
 */
import { existsSync, renameSync, writeFileSync } from 'node:fs'
import { WallClockUnavailableError } from './errors.js'
import { buildNative } from './native-build.js'

/** Path of the preload library, built on first use (gcc; scripts/ensure-tools.mjs installs it). */
export function wallClockLibrary(): string {
  if (process.platform !== 'linux') {
    throw new WallClockUnavailableError(
      `a steppable wall clock needs Linux (LD_PRELOAD), not ${process.platform}`,
    )
  }
  return buildNative(
    'wall-clock',
    'shared',
    (message, options) => new WallClockUnavailableError(message, options),
  )
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
