import type { Facts, OrderRow } from './facts.js'
import type { SeedPlan } from './generator.js'
import { type Attempt, type Call, type CheckoutCall, finalOf, type History } from './history.js'

// One checker of every promise the checkout makes (issue 37, "What must hold"), over a seed's
// history and the facts left once it is over. Each broken promise is one line naming the seed's
// property, the order, user or key, and when it happened relative to the faults, so that the
// shortest sequence can be read off a failure.

export type Property =
  | 'no-5xx'
  | '200-ends-live'
  | '202-resolves'
  | 'not-oversold'
  | 'user-limit'
  | 'redis-buyers'
  | 'charged-once'
  | 'one-key-one-answer'
  | 'actions-hold'
  | 'get-agrees'
  | 'reconcile'

export interface Broken {
  property: Property
  detail: string
}

/** Where a request falls among the faults, for a failure's message. */
export function whenInRun(h: History, at: number): string {
  const f = [...h.faults].reverse().find((x) => x.startedAt <= at + 2_000)
  if (!f) return 'before any fault'
  return `${at - f.startedAt} ms after ${f.kind} on ${f.node ?? '-'} started (undone at +${f.endedAt - f.startedAt})`
}

/** A failover's window: 2 s before the fault (a write not yet on the replica) to 2 s after it was undone. */
const inFailover = (h: History, at: number) =>
  h.faults.some((f) => f.failover && at >= f.startedAt - 2_000 && at <= f.endedAt + 2_000)

const LIVE = new Set(['confirmed', 'paid', 'reserved'])

export function check(
  plan: SeedPlan,
  h: History,
  facts: Facts,
  o: { reconcileMustExit0: boolean },
): Broken[] {
  const broken: Broken[] = []
  const add = (property: Property, detail: string) => broken.push({ property, detail })
  const checkouts = h.calls.filter((c): c is CheckoutCall => c.kind === 'checkout')
  const actionsOn = (orderId: string, kind: Call['kind']) =>
    h.calls.filter((c) => c.kind === kind && 'orderId' in c && c.orderId === orderId)
  const roundsOf = (productId: string) => h.rounds.filter((r) => r.productId === productId)
  /**
   * The round as its PUT answered it. A PUT answered 503 (its preload not shown durable) and then
   * repeated still started a round in SQL, which no answer named and where orders can be sold
   * (issue 37 item 8): such a round carries the body of the repeated PUT, the next round named.
   */
  const roundOf = (productId: string, round: number) =>
    roundsOf(productId).find((r) => r.round === round) ??
    roundsOf(productId)
      .filter((r) => r.round > round)
      .sort((a, b) => a.round - b.round)[0]
  const moneyless = new Set([...plan.brokeUsers, ...plan.poorUsers].map(String))

  // ---- no 500, on any route
  for (const c of h.calls)
    for (const a of c.attempts)
      if (a.status >= 500 && a.status !== 503)
        add(
          'no-5xx',
          `${c.kind} ${c.productId} answered ${a.status} ${a.code ?? ''} ${a.message ?? ''} (${whenInRun(h, a.sentAt)})`,
        )

  // ---- every 200 (and every 202 that SQL has) ends live, or was ended by its buyer or the admin
  /** Why an order that SQL holds is not a kept promise, or undefined if it is one. */
  const endedBadly = (row: OrderRow, a: Attempt, userId: number): string | undefined => {
    if (row.user_id !== String(userId)) return `persisted for user ${row.user_id}, answered to ${userId}`
    if (LIVE.has(row.status)) return undefined
    if (row.status === 'cancelled')
      return actionsOn(row.order_id, 'cancel').length ? undefined : 'cancelled, never by its buyer'
    if (row.status === 'refunded')
      return actionsOn(row.order_id, 'refund').length ? undefined : 'refunded, never by the admin'
    if (row.status === 'expired')
      return roundOf(row.product_id, row.round)?.payment === 'hold' ? undefined : 'expired in an instant sale'
    if (row.failure_reason === 'INSUFFICIENT_FUNDS')
      return moneyless.has(row.user_id)
        ? undefined
        : 'INSUFFICIENT_FUNDS for a user whose wallet pays 1000 units'
    if (row.failure_reason === 'stale_round') {
      // The admin ended it: a reset that had not answered when the checkout was sent. One sent
      // after the reset answered sold the old round (item 8).
      const reset = roundsOf(row.product_id).find((r) => r.round > row.round)
      if (reset && a.sentAt < reset.endedAt) return undefined
      return `failed stale_round, sent ${reset ? `${a.sentAt - reset.endedAt} ms after the reset answered` : 'with no reset'}`
    }
    return `${row.status} ${row.failure_reason ?? ''}`
  }
  const dropped: string[] = []
  for (const c of checkouts)
    for (const a of c.attempts) {
      if ((a.status !== 200 && a.status !== 202) || !a.orderId) continue
      const row = facts.orders.get(a.orderId)
      const at = `user ${c.userId} sale ${c.productId} key ${c.key ?? '-'}, ${whenInRun(h, a.sentAt)}`
      if (row === undefined) {
        if (a.status === 200)
          add(
            '200-ends-live',
            `200 for order ${a.orderId} not in SQL (${at}); GET says ${facts.polled.get(a.orderId)}`,
          )
        else if (!inFailover(h, a.sentAt))
          add(
            '202-resolves',
            `202 for order ${a.orderId} dropped outside a failover (${at}); GET says ${facts.polled.get(a.orderId)}`,
          )
        else dropped.push(a.orderId)
        continue
      }
      const why = endedBadly(row, a, c.userId)
      if (why)
        add(
          a.status === 200 ? '200-ends-live' : '202-resolves',
          `${a.status} for order ${a.orderId}: ${why} (${at})`,
        )
    }

  // ---- not oversold, nobody over the limit (SQL, per round), and Redis's buyers say the same
  const holding = [...facts.orders.values()].filter((o) => LIVE.has(o.status))
  const byRound = group(holding, (o) => `${o.product_id}/${o.round}`)
  for (const [k, orders] of byRound) {
    const [productId, roundText] = k.split('/') as [string, string]
    const round = Number(roundText)
    const r = roundOf(productId, round)
    if (!r) {
      add(
        'not-oversold',
        `${orders.length} live orders in round ${round} of ${productId}, a round no PUT answered`,
      )
      continue
    }
    const restocked = facts.restocks
      .filter((x) => x.product_id === productId && x.round === round && x.state !== 'stale')
      .reduce((s, x) => s + x.units, 0)
    if (orders.length > r.stock + restocked)
      add(
        'not-oversold',
        `sale ${productId} round ${round}: ${orders.length} live orders for ${r.stock} + ${restocked} restocked units`,
      )
    for (const [user, mine] of group(orders, (o) => o.user_id))
      if (mine.length > r.perUserLimit)
        add(
          'user-limit',
          `sale ${productId} round ${round}: user ${user} holds ${mine.length} live orders, limit ${r.perUserLimit}`,
        )
  }
  for (const s of facts.sales) {
    const r = roundOf(s.product_id, s.round)
    if (!r) continue
    const restocked = facts.restocks
      .filter((x) => x.product_id === s.product_id && x.round === s.round && x.state !== 'stale')
      .reduce((sum, x) => sum + x.units, 0)
    if (s.stock_total !== r.stock + restocked)
      add(
        'not-oversold',
        `sale ${s.product_id}: stock_total ${s.stock_total}, PUT ${r.stock} + restocks ${restocked}`,
      )
    const inSql = group(
      holding.filter((o) => o.product_id === s.product_id && o.round === s.round),
      (o) => o.user_id,
    )
    const records = facts.buyers.get(s.product_id) ?? {}
    for (const user of new Set([...Object.keys(records), ...inSql.keys()])) {
      const [count, , slots] = (records[user] ?? '0||').split('|')
      const inRedis = (slots ?? '')
        .split(',')
        .filter((x) => x !== '' && x !== '?')
        .sort()
      const sqlIds = (inSql.get(user) ?? []).map((o) => o.order_id).sort()
      if (Number(count) > s.per_user_limit)
        add(
          'user-limit',
          `sale ${s.product_id}: Redis's buyer record of user ${user} counts ${count}, limit ${s.per_user_limit}`,
        )
      if (Number(count) !== sqlIds.length || inRedis.join() !== sqlIds.join())
        add(
          'redis-buyers',
          `sale ${s.product_id} user ${user}: Redis "${records[user] ?? ''}", SQL's live orders [${(inSql.get(user) ?? []).map((o) => `${o.order_id}${heldFor(o, facts)}`).join()}]`,
        )
    }
  }

  // ---- nobody charged twice; every charge and refund on an order in the state that has one
  for (const [id, ps] of group(facts.payments, (p) => p.order_id))
    if (ps.length > 1) add('charged-once', `order ${id} charged ${ps.length} times`)
  for (const [id, rs] of group(facts.refunds, (p) => p.order_id))
    if (rs.length > 1) add('charged-once', `order ${id} refunded ${rs.length} times`)
  const paid = new Set(facts.payments.map((p) => p.order_id))
  const refunded = new Set(facts.refunds.map((p) => p.order_id))
  for (const o of facts.orders.values()) {
    const charged =
      o.status === 'paid' ||
      o.status === 'refunded' ||
      (o.status === 'confirmed' && roundOf(o.product_id, o.round)?.payment !== 'hold')
    if (charged !== paid.has(o.order_id))
      add('charged-once', `order ${o.order_id} ${o.status}: ${paid.has(o.order_id) ? 'a' : 'no'} payment`)
    if ((o.status === 'refunded') !== refunded.has(o.order_id))
      add('charged-once', `order ${o.order_id} ${o.status}: ${refunded.has(o.order_id) ? 'a' : 'no'} refund`)
  }
  const sum = (xs: { user_id: string; amount_cents: number }[], user: string) =>
    xs.filter((x) => x.user_id === user).reduce((s, x) => s + x.amount_cents, 0)
  for (const w of facts.wallets) {
    if (w.balance < 0 || w.balance !== w.funded - w.charged + w.refunded)
      add(
        'charged-once',
        `wallet ${w.user_id}: balance ${w.balance} ≠ funded ${w.funded} − charged ${w.charged} + refunded ${w.refunded}`,
      )
    // (Only this seed's sales are read: a user's charges elsewhere would show here; users are the seed's own.)
    if (w.charged !== sum(facts.payments, w.user_id) || w.refunded !== sum(facts.refunds, w.user_id))
      add(
        'charged-once',
        `wallet ${w.user_id}: charged ${w.charged} / refunded ${w.refunded}, payments ${sum(facts.payments, w.user_id)} / refunds ${sum(facts.refunds, w.user_id)}`,
      )
  }

  // ---- one Idempotency-Key, one final answer (a 202 a failover dropped is no answer)
  const droppedSet = new Set(dropped)
  // Answers are kept per round: a reset starts a key afresh, and one sent during a reset may meet either round.
  const roundAt = (productId: string, t: number) => {
    const rs = roundsOf(productId)
    if (rs.some((r) => r.startedAt <= t && t < r.endedAt)) return undefined
    return rs.filter((r) => r.endedAt <= t).at(-1)?.round
  }
  for (const [key, calls] of group(
    checkouts.filter((c) => c.key !== undefined),
    (c) => c.key!,
  )) {
    const answers = new Map<string, Attempt>()
    const firstRound = roundAt(calls[0]!.productId, calls[0]!.attempts[0]?.sentAt ?? 0)
    for (const c of calls)
      for (const a of c.attempts) {
        if (a.status === 0 || a.status === 429 || a.status === 503) continue
        if (firstRound === undefined || roundAt(c.productId, a.sentAt) !== firstRound) continue
        if (a.status === 202 && droppedSet.has(a.orderId ?? '')) continue
        const what =
          a.status === 200 || a.status === 202
            ? `order ${a.orderId}`
            : `${a.status} ${a.code ?? ''}${a.orderId ? ` ${a.orderId}` : ''}`
        if (!answers.has(what)) answers.set(what, a)
      }
    if (answers.size > 1)
      add(
        'one-key-one-answer',
        `key ${key} (user ${calls[0]!.userId}, sale ${calls[0]!.productId}): ${[...answers]
          .map(([what, a]) => `${what} at ${whenInRun(h, a.sentAt)}`)
          .join('; then ')}`,
      )
  }
  // An ALREADY_PURCHASED names an order of the user who asked.
  for (const c of checkouts)
    for (const a of c.attempts)
      if (a.code === 'ALREADY_PURCHASED' && a.orderId) {
        const row = facts.orders.get(a.orderId)
        if (row && row.user_id !== String(c.userId))
          add(
            'one-key-one-answer',
            `ALREADY_PURCHASED to user ${c.userId} names ${a.orderId} of user ${row.user_id}`,
          )
      }

  // ---- what pay, cancel and refund answered is what the order became
  for (const c of h.calls) {
    if (c.kind !== 'pay' && c.kind !== 'cancel' && c.kind !== 'refund') continue
    const f = finalOf(c)
    // The order was answered 200/202 to its buyer: "no such order" is never a final answer for
    // one SQL ends up holding (before the worker records it: 409 ORDER_PENDING, retried).
    if (f?.status === 404 && facts.orders.has(c.orderId))
      add(
        'actions-hold',
        `${c.kind} of ${c.orderId} answered 404 ${f.code ?? ''}, the order is ${facts.orders.get(c.orderId)!.status} ${facts.orders.get(c.orderId)!.failure_reason ?? ''} in SQL (${whenInRun(h, f.sentAt)})`,
      )
    if (f?.status !== 200) continue
    const row = facts.orders.get(c.orderId)
    // A pay of an instant sale's order answers 200 with it as it is: confirmed (paid when it was
    // persisted), or refunded since.
    const instantPaid = c.kind === 'pay' && f.bodyStatus === 'confirmed'
    const want = instantPaid
      ? ['confirmed', 'refunded']
      : c.kind === 'pay'
        ? ['paid', 'refunded']
        : c.kind === 'cancel'
          ? ['cancelled']
          : ['refunded']
    if (!row || !want.includes(row.status) || f.bodyStatus !== want[0])
      add(
        'actions-hold',
        `${c.kind} of ${c.orderId} answered 200 ${f.bodyStatus}, the order is ${row?.status ?? 'not in SQL'} (${whenInRun(h, f.sentAt)})`,
      )
  }

  // ---- GET /v1/orders/:id says what SQL says
  for (const [id, seen] of facts.polled) {
    const row = facts.orders.get(id)
    if (row && seen !== row.status)
      add(
        'get-agrees',
        `GET /v1/orders/${id}: ${seen}, SQL ${row.status} ${row.failure_reason ?? ''}${heldFor(row, facts)}`,
      )
  }

  // ---- the books balance in Redis and SQL
  for (const s of facts.reconcile.problems) add('reconcile', `sale ${s.product_id}: ${s.problems.join('; ')}`)
  if (o.reconcileMustExit0 && facts.reconcile.code !== 0)
    add('reconcile', `reconcile exited ${facts.reconcile.code}: ${facts.reconcile.out.slice(0, 600)}`)
  return broken
}

/** For a held order, where its pay_by fell against the SQL snapshot (a sweeper may act after it). */
function heldFor(row: OrderRow, facts: Facts): string {
  if (row.pay_by_ms === null) return ''
  return ` (pay_by ${Math.round(row.pay_by_ms - facts.sqlReadAtMs)} ms after the SQL snapshot)`
}

function group<T>(xs: readonly T[], key: (x: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>()
  for (const x of xs) {
    const k = key(x)
    const list = m.get(k)
    if (list) list.push(x)
    else m.set(k, [x])
  }
  return m
}
