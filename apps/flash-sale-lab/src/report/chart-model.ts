// Turns one phase of a ReportInput into the plots the page draws: uPlot-ready columns, series
// styles and the fault windows on the load's time axis. Kept apart from the HTML so the test can
// count what must be on the page.
import type { ChaosEvent } from '@kunci/topology'
import type { PhaseReport, Sample, StrategyReport } from './report-input.js'

export type ChartKind = 'rps' | 'latency' | 'stock' | 'queue'

export interface SeriesStyle {
  label: string
  color: string
  width?: number
  dash?: number[]
  fill?: string
  /** Draw as steps (gauges sampled at intervals). */
  stepped?: boolean
}

export interface FaultWindow {
  label: string
  /** Seconds on the load's axis. */
  start: number
  end: number
  error?: string
}

export interface ChartModel {
  id: string
  kind: ChartKind
  title: string
  unit: string
  /** Cursor sync group: the four plots of a phase move together. */
  group: string
  /** [x, y1, y2, ...]: uPlot's AlignedData. */
  data: (number | null)[][]
  series: SeriesStyle[]
  faults: FaultWindow[]
  /** Right end of the x axis, the same for the four plots of a phase. */
  xMax: number
}

/** Status colours: success greens, refusals warm, failures red; unknown codes grey. */
const STATUS_COLORS: Record<string, string> = {
  '200': '#16a34a',
  '202': '#0d9488',
  '409': '#d97706',
  '429': '#7c3aed',
  '503': '#dc2626',
  '500': '#991b1b',
}
const OTHER_COLORS = ['#64748b', '#0ea5e9', '#db2777', '#84cc16']
const OP_COLORS = ['#0369a1', '#a16207', '#be185d']

function statusColor(status: string, i: number): string {
  return STATUS_COLORS[status] ?? OTHER_COLORS[i % OTHER_COLORS.length]!
}

/** runChaos events (ms since the chaos origin) → windows in seconds since the load started. */
export function faultWindows(phase: PhaseReport): FaultWindow[] {
  const offsetMs = (phase.chaosStartedAtMs ?? phase.load.startedAtMs) - phase.load.startedAtMs
  const endOfRun = phase.load.durationMs / 1000
  return phase.faults.map((e: ChaosEvent) => {
    const start = (offsetMs + e.startedMs) / 1000
    const end = e.endedMs === undefined ? endOfRun : (offsetMs + e.endedMs) / 1000
    return {
      label: e.target === undefined || e.label !== e.fault ? e.label : `${e.label} ${e.target}`,
      start: round(start),
      end: round(Math.max(end, start)),
      ...(e.error === undefined ? {} : { error: e.error }),
    }
  })
}

const round = (x: number) => Math.round(x * 1000) / 1000

function gauge(samples: Sample[]): (number | null)[][] {
  const sorted = [...samples].sort((a, b) => a.t - b.t)
  return [sorted.map((s) => s.t), sorted.map((s) => s.value)]
}

export function phaseCharts(strategy: StrategyReport, phase: PhaseReport): ChartModel[] {
  const s = phase.load.series
  const group = `${strategy.strategy}-${phase.id}`
  const faults = faultWindows(phase)
  const lastT = (samples: Sample[]) => samples.reduce((m, x) => Math.max(m, x.t), 0)
  const xMax = Math.max(
    s.t[s.t.length - 1] ?? 0,
    lastT(phase.stockRemaining),
    lastT(phase.queuePending),
    ...faults.map((f) => f.end),
    1,
  )
  const statuses = Object.keys(s.byStatus).sort()
  // With a waiting room, joins and polls answer 200 too: their counts are drawn beside the statuses.
  const ops = Object.keys(s.byOp ?? {}).length > 1 ? Object.keys(s.byOp!).sort() : []
  const rps: ChartModel = {
    id: `${group}-rps`,
    kind: 'rps',
    title:
      ops.length > 0
        ? 'Requests per second by status, and by kind (dotted)'
        : 'Requests per second by status',
    unit: 'req/s',
    group,
    data: [s.t, ...statuses.map((k) => s.byStatus[k]!), s.transportErrors, ...ops.map((op) => s.byOp![op]!)],
    series: [
      ...statuses.map((k, i) => ({
        label: k,
        color: statusColor(k, i),
        width: 2,
        ...(k === '200' || k === '202' ? { fill: `${statusColor(k, i)}22` } : {}),
      })),
      { label: 'no answer', color: '#0f172a', width: 1.5, dash: [4, 3] },
      ...ops.map((op, i) => ({
        label: op,
        color: OP_COLORS[i % OP_COLORS.length]!,
        width: 1.5,
        dash: [2, 2],
      })),
    ],
    faults,
    xMax,
  }
  const latency: ChartModel = {
    id: `${group}-latency`,
    kind: 'latency',
    title: 'Latency per second',
    unit: 'ms',
    group,
    data: [s.t, s.p50Ms, s.p99Ms, s.maxMs],
    series: [
      { label: 'p50', color: '#2563eb', width: 2 },
      { label: 'p99', color: '#ea580c', width: 2 },
      { label: 'max', color: '#94a3b8', width: 1, dash: [3, 3] },
    ],
    faults,
    xMax,
  }
  const stock: ChartModel = {
    id: `${group}-stock`,
    kind: 'stock',
    title: `Stock remaining (of ${phase.stock})`,
    unit: 'units',
    group,
    data: gauge(phase.stockRemaining),
    series: [{ label: 'stock', color: '#0891b2', width: 2, fill: '#0891b21f', stepped: true }],
    faults,
    xMax,
  }
  const queue: ChartModel = {
    id: `${group}-queue`,
    kind: 'queue',
    title: 'Orders queued, not yet persisted',
    unit: 'orders',
    group,
    data: gauge(phase.queuePending),
    series: [{ label: 'pending', color: '#9333ea', width: 2, fill: '#9333ea1f', stepped: true }],
    faults,
    xMax,
  }
  return [rps, latency, stock, queue]
}
