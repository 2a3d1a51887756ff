// The page's stylesheet (uPlot's own CSS is inlined before it). Light, quiet, print-friendly.
export const REPORT_CSS = `
:root {
  --ink: #0f172a; --muted: #64748b; --line: #e2e8f0; --bg: #f8fafc; --card: #ffffff;
  --pass: #15803d; --pass-bg: #dcfce7; --fail: #b91c1c; --fail-bg: #fee2e2; --warn: #b45309; --warn-bg: #fef3c7;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif; }
main { max-width: 1480px; margin: 0 auto; padding: 28px 28px 48px; }
header h1 { margin: 0 0 4px; font-size: 26px; letter-spacing: -0.02em; }
header .sub { color: var(--muted); }
.chips { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 10px; }
.chip { display: inline-flex; gap: 4px; align-items: center; padding: 2px 9px; border-radius: 999px;
  background: #eef2f7; color: #334155; font-size: 12px; white-space: nowrap; }
.chip b { font-weight: 600; }
.banner { margin: 20px 0 22px; padding: 16px 20px; border-radius: 12px; border: 1px solid; display: flex; gap: 16px; align-items: flex-start; }
.banner .icon { line-height: 0; padding-top: 2px; }
.banner h2 { margin: 0 0 4px; font-size: 19px; }
.banner ul { margin: 4px 0 0; padding-left: 18px; }
.banner.pass { background: var(--pass-bg); border-color: #86efac; color: #14532d; }
.banner.fail { background: var(--fail-bg); border-color: #fca5a5; color: #7f1d1d; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 18px 20px; margin-bottom: 22px;
  box-shadow: 0 1px 2px rgba(15, 23, 42, 0.04); }
h2.section { font-size: 18px; margin: 0 0 12px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { padding: 7px 6px; text-align: right; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 11px; text-transform: uppercase; letter-spacing: 0.02em;
  white-space: normal; vertical-align: bottom; line-height: 1.2; }
th.l, td.l { text-align: left; }
tbody tr:hover { background: #f8fafc; }
tr.first-of-strategy td { border-top: 2px solid #cbd5e1; }
td.bad { color: var(--fail); font-weight: 700; }
td.good { color: var(--pass); }
td.zero { color: #94a3b8; }
.codes span { display: inline-block; margin-left: 6px; }
.dot { display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 3px; vertical-align: 0; }
.verdict { display: inline-block; padding: 2px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; }
.verdict.pass { background: var(--pass-bg); color: var(--pass); }
.verdict.fail { background: var(--fail-bg); color: var(--fail); }
.verdict.expected-fail { background: var(--warn-bg); color: var(--warn); }
.strategy-head { display: flex; align-items: baseline; gap: 12px; flex-wrap: wrap; margin-bottom: 4px; }
.strategy-head h2 { margin: 0; font-size: 20px; }
.strategy-head code { font-size: 18px; }
.desc { color: var(--muted); margin: 0 0 10px; }
.phase { margin-top: 16px; padding-top: 12px; border-top: 1px dashed var(--line); }
.phase:first-of-type { border-top: 0; padding-top: 0; }
.phase-head { display: flex; align-items: baseline; gap: 14px; flex-wrap: wrap; margin-bottom: 8px; }
.phase-head h3 { margin: 0; font-size: 15px; }
.stats { color: var(--muted); font-size: 12.5px; font-variant-numeric: tabular-nums; }
.stats b { color: var(--ink); font-weight: 600; }
.stats .bad { color: var(--fail); }
.faults { display: flex; flex-wrap: wrap; gap: 6px; margin: 0 0 10px; }
.fault { font-size: 12px; padding: 2px 9px; border-radius: 6px; background: #fff1f2; color: #9f1239; border: 1px solid #fecdd3; }
.fault .num { display: inline-block; min-width: 17px; height: 17px; line-height: 17px; margin-right: 6px; border-radius: 50%;
  background: #dc2626; color: #fff; font-size: 10.5px; font-weight: 700; text-align: center; }
.fault.failed .num { background: #6b7280; }
.fault.failed { background: #f3f4f6; color: #4b5563; border-color: #d1d5db; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 14px 18px; }
@media (max-width: 760px) { .grid { grid-template-columns: minmax(0, 1fr); } }
figure { margin: 0; min-width: 0; }
figcaption { font-size: 12.5px; font-weight: 600; color: #334155; margin-bottom: 2px; }
.chart { min-width: 0; overflow: hidden; }
.uplot { font-family: inherit; }
.uplot .u-legend { font-size: 11.5px; text-align: left; }
.uplot .u-legend .u-series { padding: 1px 4px; }
.uplot .u-legend th { text-transform: none; letter-spacing: 0; font-size: 11.5px; color: #334155; }
.uplot .u-legend td { padding: 1px 4px; }
.room-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 14px 22px; }
.room-strategy h3 { margin: 4px 0 2px; font-size: 15px; }
table.comparison td:first-child { white-space: normal; }
p.skipped { color: var(--muted); margin: 4px 0; }
td.skipped { color: var(--muted); white-space: normal; }
dl.glossary { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; font-size: 13px; }
dl.glossary dt { font-weight: 600; }
dl.glossary dd { margin: 0; color: #334155; }
footer { color: var(--muted); font-size: 12px; margin-top: 8px; }
`
