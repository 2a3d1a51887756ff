// The HTML report's public surface, for the demo.
export { type ChartKind, type ChartModel, faultWindows, phaseCharts } from './chart-model.js'
export { faultImpacts } from './fault-impact.js'
export { moneyRows, moneySection } from './money-card.js'
export { renderReport, writeReport } from './render-report.js'
export {
  type CrowdRun,
  type FaultImpact,
  type MoneyFigures,
  type PhaseReport,
  REPORT_INPUT_VERSION,
  type ReportInput,
  type ReportVerdict,
  type RoomComparison,
  type Sample,
  type StrategyReport,
  type SummaryRow,
} from './report-input.js'
