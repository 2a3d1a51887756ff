// cluster
export { assertValidTag, groupBySlot, KEY_PART_SEPARATOR, sameSlot, taggedKey } from './cluster/hash-tag.js'
export type { DeleteByPatternOptions, ScanOptions } from './cluster/scan.js'
export {
  DEFAULT_DELETE_BY_PATTERN_OPTIONS,
  DEFAULT_SCAN_OPTIONS,
  deleteByPattern,
  escapeGlob,
  MAX_SCAN_COUNT,
  resolveDeleteByPatternOptions,
  resolveScanOptions,
  scanKeys,
} from './cluster/scan.js'
export { hashTag, keySlot, SLOT_COUNT } from './cluster/slot.js'
