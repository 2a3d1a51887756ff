// The end-of-run text: one table per strategy (a row per phase), what each fault cost, and the
// verdict. Built from the same ReportInput as the HTML report, so the two never disagree.
import { moneyRows } from '../report/money-card.js'
import type {
  FaultImpact,
  MoneyFigures,
  ReportInput,
  StrategyReport,
  SummaryRow,
} from '../report/report-input.js'
import { formatComparison } from '../report/room-comparison.js'

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(1))
const recovery = (v: number | null) => (v === null ? 'not recovered' : `${(v / 1000).toFixed(1)} s`)

function statuses(row: SummaryRow): string {
  return Object.entries(row.byStatus)
    .filter(([, n]) => n > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([code, n]) => `${code}:${n}`)
    .join(' ')
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 || i === 3 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)]
}

function faultLine(f: FaultImpact): string {
  return `    ${f.label.padEnd(32)} ${String(f.failed).padStart(5)} of ${String(f.total).padStart(6)} requests failed, recovery ${recovery(f.recoveryMs)}`
}

export function formatStrategy(s: StrategyReport): string {
  const header = [
    'phase',
    'req/s',
    'p50/p99/max ms',
    'statuses',
    'sold',
    'oversold',
    'persisted',
    'dup',
    '2x charge',
    'verdict',
  ]
  const rows = s.phases.map((p) => {
    const r = p.summary
    return [
      p.id,
      String(r.requestsPerSecond),
      `${ms(r.p50Ms)}/${ms(r.p99Ms)}/${ms(r.maxMs)}`,
      statuses(r),
      String(r.sold),
      String(r.oversold),
      String(r.persisted),
      String(r.duplicates),
      String(r.doubleCharges),
      r.verdict,
    ]
  })
  const out = [`${s.strategy}: ${s.description ?? ''}`, ...table(header, rows).map((l) => `  ${l}`)]
  for (const p of s.phases) {
    if (p.summary.faults.length > 0) {
      out.push(`  ${p.id}: faults (requests answered 5xx or not at all while in effect)`)
      out.push(...p.summary.faults.map(faultLine))
    } else out.push(`  ${p.id}: no fault`)
    for (const n of p.summary.notes ?? []) out.push(`    · ${n}`)
  }
  out.push(...formatComparison(s))
  out.push(...formatMoney(s))
  return out.join('\n')
}

/** One line of a money phase's books, for the demo's log. */
export function formatMoneyLine(m: MoneyFigures): string {
  return moneyRows(m)
    .map(([label, value]) => `${label} ${value}`)
    .join(' · ')
}

/** The money phases of a strategy: a figure per row, a column per sale; and the refused ones. */
export function formatMoney(s: StrategyReport): string[] {
  const phases = s.phases.filter((p) => p.money !== undefined)
  const out: string[] = []
  if (phases.length > 0) {
    const columns = phases.map((p) => moneyRows(p.money!))
    const labels = columns[0]!.map(([label]) => label)
    const w = Math.max(...labels.map((l) => l.length))
    const widths = phases.map((p, i) => Math.max(p.id.length, ...columns[i]!.map(([, v]) => v.length)))
    out.push('  money: the books of each sale once drained')
    out.push(`    ${''.padEnd(w)}  ${phases.map((p, i) => p.id.padEnd(widths[i]!)).join('  ')}`)
    labels.forEach((label, row) => {
      out.push(`    ${label.padEnd(w)}  ${columns.map((c, i) => c[row]![1].padEnd(widths[i]!)).join('  ')}`)
    })
  }
  for (const m of s.moneySkipped ?? []) out.push(`  ${m.phase}: ${m.reason}`)
  return out
}

export function formatSummary(input: ReportInput): string {
  const v = input.verdict
  const verdict = [`${v.ok ? 'PASS' : 'FAIL'}: ${v.headline}`, ...(v.details ?? []).map((d) => `  ${d}`)]
  return [...input.strategies.map(formatStrategy), verdict.join('\n')].join('\n\n')
}
