// The load generator's public surface, for the CLI and the demo.
export { LoadError, type LoadErrorCode, LoadOptionError, TargetUnreachableError } from './errors.js'
export { type LatencySummary, percentile } from './latency.js'
export { DEFAULT_LOAD_OPTIONS, DEFAULT_STAGES, type LoadOptions, resolveLoadOptions } from './load-options.js'
export { formatProgress } from './progress.js'
export {
  LOAD_RESULT_VERSION,
  type LoadOrder,
  type LoadResult,
  type LoadSecond,
  type LoadSeries,
  type LoadTotals,
} from './result.js'
export { classifyTransportError, type RunLoadHooks, runLoad } from './run-load.js'
export { parseStages, type Stage, totalDurationMs, vusAt } from './stages.js'
