import type { OrderEvent } from '../domain/order-event.js'
import { ensureWallets, type Queryable } from './wallets.js'

/**
 * How a worker's batch (order-batches.ts) reads and debits its wallets: the guarded wallet every
 * strategy uses, and the naive one the `naive` strategy's batches get, for contrast. The batch
 * writer is given one and does not branch on the strategy; OrderStore picks (batchWalletFor).
 */

/** A reserved order event as the batch writer needs it: the stream's order event (domain/). */
export type BatchEvent = OrderEvent

export interface BatchWallet {
  /** The balances of these events' users, as the batch decides against them. */
  balances(c: Queryable, events: readonly BatchEvent[]): Promise<Map<string, number>>
  /** Debits the orders decided `confirmed` and records their payments; `left`: balances as the batch left them. */
  debit(c: Queryable, charges: readonly BatchEvent[], left: ReadonlyMap<string, number>): Promise<void>
}

export class GuardedBatchWallet implements BatchWallet {
  constructor(readonly defaultWalletCents = 0) {}

  /**
   * The guarded wallet: the batch's wallets (created with the default balance if new), locked
   * FOR UPDATE in user_id order until the transaction ends. Balances read under the lock cannot
   * change before the debit is written: the check and the debit are one critical section.
   */
  async balances(c: Queryable, events: readonly BatchEvent[]): Promise<Map<string, number>> {
    const users = [...new Set(events.map((e) => e.userId))].sort()
    // New wallets are this transaction's own until it commits (another inserting the same user
    // waits on the unique index), so only the existing ones need the explicit lock.
    const created = await ensureWallets(c, users, this.defaultWalletCents)
    const balances = new Map(created.map((u) => [u, this.defaultWalletCents]))
    const existing = users.filter((u) => !balances.has(u))
    if (existing.length > 0) {
      const r = await c.query<{ user_id: string; balance_cents: string }>(
        'SELECT user_id, balance_cents FROM wallets WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE',
        [existing],
      )
      for (const row of r.rows) balances.set(row.user_id, Number(row.balance_cents))
    }
    return balances
  }

  async debit(c: Queryable, charges: readonly BatchEvent[]): Promise<void> {
    await debit(c, charges, undefined)
  }
}

export class NaiveBatchWallet implements BatchWallet {
  constructor(readonly defaultWalletCents = 0) {}

  /**
   * The naive wallet (strategy 'naive' only), for contrast, as the naive stock is kept: the
   * balance is read without a lock, and the debit written later as "balance = what I read −
   * price". Two transactions that read the same balance both pass the check, and the second
   * write overwrites the first: two payments, one debit (the source articles' double charge).
   * The wallets' CHECK (balance >= 0) never fires: each write is what one reader thought was left.
   */
  async balances(c: Queryable, events: readonly BatchEvent[]): Promise<Map<string, number>> {
    const users = [...new Set(events.map((e) => e.userId))].sort()
    await ensureWallets(c, users, this.defaultWalletCents)
    const r = await c.query<{ user_id: string; balance_cents: string }>(
      'SELECT user_id, balance_cents FROM wallets WHERE user_id = ANY($1)',
      [users],
    )
    return new Map(r.rows.map((row) => [row.user_id, Number(row.balance_cents)]))
  }

  async debit(
    c: Queryable,
    charges: readonly BatchEvent[],
    left: ReadonlyMap<string, number>,
  ): Promise<void> {
    await debit(c, charges, left)
  }
}

/**
 * One debit per wallet and one payment per order, for the orders decided `confirmed`. Guarded:
 * balance − what this batch charges, on rows locked since the check. Naive (`naiveLeft`): the
 * balance the naive code computed from its unlocked read, written as is.
 */
async function debit(
  c: Queryable,
  charges: readonly BatchEvent[],
  naiveLeft: ReadonlyMap<string, number> | undefined,
): Promise<void> {
  const perUser = new Map<string, { cents: number; n: number }>()
  for (const e of charges) {
    const t = perUser.get(e.userId) ?? { cents: 0, n: 0 }
    t.cents += e.priceCents
    t.n++
    perUser.set(e.userId, t)
  }
  const users = [...perUser.keys()].sort()
  if (naiveLeft) {
    // The row locks in user order only so that two naive batches cannot deadlock: the balance
    // was read before, without them, which is the defect.
    await c.query('SELECT 1 FROM wallets WHERE user_id = ANY($1) ORDER BY user_id FOR UPDATE', [users])
  }
  // An upsert that always meets its row (created or locked above): ON CONFLICT goes through the
  // primary key whatever the planner thinks of the table's size (an UPDATE … FROM unnest was
  // planned as a scan of every wallet per batch).
  await c.query(
    `INSERT INTO wallets (user_id, balance_cents, charged_cents, charges)
       SELECT * FROM unnest($1::text[], $4::bigint[], $2::bigint[], $3::int[]) ORDER BY 1
       ON CONFLICT (user_id) DO UPDATE SET
         balance_cents = ${naiveLeft ? 'EXCLUDED.balance_cents' : 'wallets.balance_cents - EXCLUDED.charged_cents'},
         charged_cents = wallets.charged_cents + EXCLUDED.charged_cents,
         charges = wallets.charges + EXCLUDED.charges, updated_at = now()`,
    [
      users,
      users.map((u) => perUser.get(u)!.cents),
      users.map((u) => perUser.get(u)!.n),
      // Naive: the balance it computed from its unlocked read. Guarded: unused (the row exists).
      users.map((u) => naiveLeft?.get(u) ?? 0),
    ],
  )
  await c.query(
    `INSERT INTO payments (order_id, user_id, amount_cents)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`,
    [charges.map((e) => e.orderId), charges.map((e) => e.userId), charges.map((e) => e.priceCents)],
  )
}
