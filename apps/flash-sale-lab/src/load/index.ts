// The load generator's public surface, for the CLI and the demo.
export {
  type CrowdFigures,
  crowdFigures,
  formatCrowd,
  ranks,
  type Spread,
  spearman,
  spread,
} from './crowd-figures.js'
export { LoadError, type LoadErrorCode, LoadOptionError, TargetUnreachableError } from './errors.js'
export { type LatencySummary, percentile } from './latency.js'
export {
  DEFAULT_LOAD_OPTIONS,
  DEFAULT_STAGES,
  LOAD_MODES,
  type LoadMode,
  type LoadOptions,
  resolveLoadOptions,
} from './load-options.js'
export { formatProgress } from './progress.js'
export {
  LOAD_RESULT_VERSION,
  type LoadOp,
  type LoadOrder,
  type LoadResult,
  type LoadSecond,
  type LoadSeries,
  type LoadTotals,
  type LoadUser,
  type LoadUserOutcome,
} from './result.js'
export { classifyTransportError, type RunLoadHooks, runLoad } from './run-load.js'
export { arrivalsBy, parseStages, type Stage, totalDurationMs, vusAt } from './stages.js'
