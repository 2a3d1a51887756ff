import { dashboardExpressions } from './grafana/dashboard.js'
import { allRules } from './prometheus/rules.js'

/**
 * Metric names read by the dashboard and the alert rules, so a test (here, and the service's own
 * end-to-end test against a live /metrics) can check that each one is really exported.
 */

// PromQL words that look like metric names: functions (followed by '('), aggregation and
// set operators, modifiers.
const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
])

/** Series that Prometheus itself creates for every target. */
export const PROMETHEUS_SYNTHETIC = Object.freeze(['up'])

/** Metric (series) names in one PromQL expression: `rate(x_bucket{a="b"}[5m])` → ['x_bucket']. */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // string literals (label values, regexes)
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // range selectors
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ') // label lists
  const names = new Set<string>()
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0]
    const after = stripped.slice(m.index + word.length).trimStart()
    if (after.startsWith('(')) continue // a function or aggregation
    if (KEYWORDS.has(word)) continue
    names.add(word)
  }
  return [...names]
}

/** Every expression of the dashboard and the alert rules. */
export function expressionsUsed(): string[] {
  return [...dashboardExpressions(), ...allRules().map((r) => r.expr)]
}

/** Every series name used, sorted, `up` included (see PROMETHEUS_SYNTHETIC). */
export function metricNamesUsed(): string[] {
  return [...new Set(expressionsUsed().flatMap(metricNamesIn))].sort()
}

/** Series names in a Prometheus text exposition (a /metrics page). */
export function seriesNamesIn(exposition: string): Set<string> {
  const names = new Set<string>()
  for (const line of exposition.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)
    if (m) names.add(m[0])
  }
  return names
}
