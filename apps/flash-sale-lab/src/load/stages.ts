// k6-style stages: each `{ durationMs, target }` ramps the virtual-user count linearly from the
// previous stage's target (0 for the first) to its own, as k6's `ramping-vus` executor does.
import { parseDuration } from '@kunci/topology'
import { LoadOptionError } from './errors.js'

export interface Stage {
  durationMs: number
  /** VUs at the end of the stage. */
  target: number
}

/** '30s:100,1m:500,30s:0' → stages; throws LoadOptionError('--stages') for anything else. */
export function parseStages(text: string, option = '--stages'): Stage[] {
  const parts = text
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '')
  if (parts.length === 0)
    throw new LoadOptionError(option, `expected 'duration:vus,...' like '30s:100,1m:500,30s:0'`)
  return parts.map((part, i) => {
    const [duration, target, extra] = part.split(':')
    if (duration === undefined || target === undefined || extra !== undefined) {
      throw new LoadOptionError(option, `stage ${i + 1} '${part}' is not 'duration:vus' (e.g. '30s:100')`)
    }
    let durationMs: number
    try {
      durationMs = parseDuration(duration)
    } catch {
      throw new LoadOptionError(
        option,
        `stage ${i + 1} has a bad duration '${duration}' (use 500ms, 30s, 1m)`,
      )
    }
    const vus = Number(target)
    if (!/^\d+$/.test(target) || !Number.isSafeInteger(vus)) {
      throw new LoadOptionError(option, `stage ${i + 1} has a bad VU count '${target}' (a whole number >= 0)`)
    }
    return { durationMs, target: vus }
  })
}

export function validateStages(stages: readonly Stage[], option = 'stages'): Stage[] {
  if (!Array.isArray(stages) || stages.length === 0)
    throw new LoadOptionError(option, 'expected at least one stage')
  return stages.map((s, i) => {
    if (!Number.isFinite(s.durationMs) || s.durationMs < 0) {
      throw new LoadOptionError(option, `stage ${i + 1}: durationMs must be >= 0, got ${s.durationMs}`)
    }
    if (!Number.isSafeInteger(s.target) || s.target < 0) {
      throw new LoadOptionError(option, `stage ${i + 1}: target must be a whole number >= 0, got ${s.target}`)
    }
    return { durationMs: s.durationMs, target: s.target }
  })
}

export function totalDurationMs(stages: readonly Stage[]): number {
  return stages.reduce((sum, s) => sum + s.durationMs, 0)
}

export function peakVus(stages: readonly Stage[]): number {
  return stages.reduce((max, s) => Math.max(max, s.target), 0)
}

/** Target VU count `elapsedMs` into the run (rounded down, like k6); the last target after the end. */
export function vusAt(stages: readonly Stage[], elapsedMs: number): number {
  let from = 0
  let start = 0
  for (const stage of stages) {
    const end = start + stage.durationMs
    if (elapsedMs < end) {
      const progress = stage.durationMs === 0 ? 1 : (elapsedMs - start) / stage.durationMs
      return Math.floor(from + (stage.target - from) * Math.max(0, progress))
    }
    from = stage.target
    start = end
  }
  return from
}

/**
 * Crowd modes: how many users have arrived `elapsedMs` into the run, the highest VU count the
 * ramp has reached so far. A stage's own target counts once its end has passed, even if no tick
 * fell on the instant it was reached (a ramp 2s→200, 1s→0 brings 200 users, not 199).
 */
export function arrivalsBy(stages: readonly Stage[], elapsedMs: number): number {
  let reached = 0
  let from = 0
  let start = 0
  for (const stage of stages) {
    const end = start + stage.durationMs
    if (elapsedMs < end) {
      const progress = stage.durationMs === 0 ? 1 : (elapsedMs - start) / stage.durationMs
      return Math.max(reached, Math.floor(from + (stage.target - from) * Math.max(0, progress)))
    }
    reached = Math.max(reached, stage.target)
    from = stage.target
    start = end
  }
  return reached
}
