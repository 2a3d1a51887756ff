// The report's "Money and the life of an order" card (issue 16) and the same figures as text for
// the demo's console: per strategy and money phase, the books of the sale once drained. Built from
// PhaseReport.money (see MoneyFigures).

import { esc } from './html-escape.js'
import type { MoneyFigures, ReportInput, StrategyReport } from './report-input.js'

const int = (n: number) => Math.round(n).toLocaleString('en')
const amount = (n: number) => n.toLocaleString('en', { minimumFractionDigits: 2, maximumFractionDigits: 2 })
const mark = (ok: boolean) => (ok ? '✓' : '✗ BROKEN')

/** stock = sold + remaining + pending, in figures. */
export function stockEquation(m: MoneyFigures): string {
  const remaining = m.remaining === null ? '?' : int(m.remaining)
  return `${int(m.stock)} = ${int(m.sold)} + ${remaining} + ${int(m.pendingReturns)} ${mark(m.stockBalanced)}`
}

/** units reserved = sold + returned + pending, in figures. */
export function returnsEquation(m: MoneyFigures): string {
  return `${int(m.reserved)} = ${int(m.sold)} + ${int(m.returned)} + ${int(m.pendingReturns)} ${mark(m.returnsBalanced)}`
}

/** The figures of one sale, as [label, value]: the console's rows and the card's columns. */
export function moneyRows(m: MoneyFigures): [string, string][] {
  const other = Object.entries(m.failedOther)
    .map(([reason, n]) => `${reason} ${int(n)}`)
    .join(', ')
  const acts = Object.entries(m.payments)
    .map(([what, n]) => `${what} ${int(n ?? 0)}`)
    .join(', ')
  return [
    ['payment', m.payment === 'hold' ? `hold ${m.holdSeconds ?? '?'} s` : 'instant'],
    ['paid', int(m.paid)],
    [
      'failed INSUFFICIENT_FUNDS',
      `${int(m.failedFunds)}${m.checkoutRefusedFunds > 0 ? ` (+ ${int(m.checkoutRefusedFunds)} × 402 at checkout)` : ''}`,
    ],
    ['returned', int(m.returned)],
    ['expired', int(m.expired)],
    ['cancelled', int(m.cancelled)],
    ['remaining', m.remaining === null ? '?' : int(m.remaining)],
    ['balances: sum · min', `${amount(m.balances.sum)} · ${amount(m.balances.min)}`],
    ['stock = sold + remaining + pending', stockEquation(m)],
    ['reserved = sold + returned + pending', returnsEquation(m)],
    // Always there, so that the console's columns line up row by row.
    ['other failures', other || '–'],
    ['buyers with a held order', acts || '–'],
  ]
}

function rows(s: StrategyReport): string[] {
  const out: string[] = []
  const money = s.phases.filter((p) => p.money !== undefined)
  money.forEach((p, i) => {
    const m = p.money!
    const ok = (b: boolean) => (b ? 'good' : 'bad')
    out.push(`<tr class="${i === 0 ? 'first-of-strategy' : ''}" data-phase="${esc(`${s.strategy}-${p.id}`)}">
  <td class="l">${i === 0 ? `<b>${esc(s.strategy)}</b>` : ''}</td>
  <td class="l">${esc(p.id)} <span class="stats">${m.payment === 'hold' ? `hold ${esc(m.holdSeconds ?? '?')} s` : 'instant'}</span></td>
  <td>${int(m.stock)}</td><td>${int(m.reserved)}</td><td>${int(m.paid)}</td>
  <td>${int(m.failedFunds)}${m.checkoutRefusedFunds > 0 ? ` <span class="stats">(+${int(m.checkoutRefusedFunds)} × 402)</span>` : ''}</td>
  <td>${int(m.returned)}</td><td>${int(m.expired)}</td><td>${int(m.cancelled)}</td>
  <td>${m.remaining === null ? '?' : int(m.remaining)}</td><td>${amount(m.balances.sum)}</td>
  <td class="${m.balances.min < 0 ? 'bad' : ''}">${amount(m.balances.min)}</td>
  <td class="${ok(m.stockBalanced)}">${esc(stockEquation(m))}</td>
  <td class="${ok(m.returnsBalanced)}">${esc(returnsEquation(m))}</td>
  <td class="l"><span class="verdict ${p.summary.verdict}">${p.summary.verdict === 'pass' ? 'held' : p.summary.verdict === 'fail' ? 'BROKEN' : 'as expected'}</span></td>
</tr>`)
  })
  for (const m of s.moneySkipped ?? [])
    out.push(
      `<tr><td class="l"><b>${esc(s.strategy)}</b></td><td class="l">${esc(m.phase)}</td><td class="l skipped" colspan="13">${esc(m.reason)}</td></tr>`,
    )
  return out
}

/** The card, or '' when no strategy ran a money phase (reports made before them). */
export function moneySection(input: ReportInput): string {
  const body = input.strategies.flatMap(rows)
  if (body.length === 0) return ''
  return `<section class="card" id="money"><h2 class="section">Money and the life of an order</h2>
<p class="desc">Per sale, once the worker and the expiry sweeper were done. <b>instant</b>: charged when the worker
persists the order; users funded below the price fail <code>INSUFFICIENT_FUNDS</code> and their units go back to the
sale, to be bought by later arrivals. <b>hold</b>: reserved until <code>pay_by</code>; buyers pay, cancel, or never pay
(expired); cancelled and expired units go back. The issue's <i>stock = sold + returned + remaining</i> is checked as two
equations: <i>stock = sold + remaining + pending</i> (SQL's <code>sold</code>, the units held by orders; Redis's stock;
returns not yet back in Redis, 0 once drained) and <i>reserved = sold + returned + pending</i> (every unit ever
reserved is held by an order or was given back, once; a returned unit is in <i>remaining</i> or sold again).
Balances are those of the phase's users: never below 0.</p>
<div class="table-wrap"><table class="money">
<thead><tr><th class="l">Strategy</th><th class="l">Sale, payment</th><th>stock</th><th>reserved</th><th>paid</th>
<th>failed INSUFFICIENT_FUNDS</th><th>returned</th><th>expired</th><th>cancelled</th><th>remaining</th>
<th>balances sum</th><th>balances min</th><th>stock = sold + remaining + pending</th><th>reserved = sold + returned + pending</th>
<th class="l">verdict</th></tr></thead>
<tbody>${body.join('\n')}</tbody></table></div></section>`
}
