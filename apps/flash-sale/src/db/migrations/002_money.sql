-- Money and the life of an order (issue 16): wallets with balances, orders that are held until
-- paid, and units that go back to the sale when an order does not end paid.

-- A wallet's balance never goes below zero: the CHECK is the last guard, the charge itself is a
-- guarded UPDATE (… WHERE balance_cents >= amount) in the transaction that records the payment.
-- Invariant (reconcile): balance = funded − charged + refunded. `funded` moves only with the
-- admin's PUT /admin/wallets/:user_id (by the difference it makes) and with the default balance a
-- wallet is created with.
ALTER TABLE wallets
  ADD COLUMN balance_cents  bigint NOT NULL DEFAULT 0 CHECK (balance_cents >= 0),
  ADD COLUMN funded_cents   bigint NOT NULL DEFAULT 0,
  ADD COLUMN refunded_cents bigint NOT NULL DEFAULT 0,
  ADD COLUMN updated_at     timestamptz NOT NULL DEFAULT now();
-- Wallets from before balances existed: they were funded with exactly what they were charged.
UPDATE wallets SET funded_cents = charged_cents;

-- How a sale is paid: 'instant' (charged when the worker persists the order, as before) or
-- 'hold' (the order is reserved for hold_seconds and paid by POST /v1/orders/:id/pay).
-- `returned` counts the units of the round that went back to the sale in Redis.
-- `sweep_fence` is the last fencing token of the expiry sweeper's lock that wrote this sale: a
-- sweeper whose lock expired (paused, partitioned) carries an older token and writes nothing.
ALTER TABLE sales
  ADD COLUMN payment      text NOT NULL DEFAULT 'instant' CHECK (payment IN ('instant', 'hold')),
  ADD COLUMN hold_seconds integer CHECK (hold_seconds IS NULL OR hold_seconds > 0),
  ADD COLUMN returned     integer NOT NULL DEFAULT 0 CHECK (returned >= 0),
  ADD COLUMN sweep_fence  bigint NOT NULL DEFAULT 0;

-- The order's life (src/domain/order-states.ts):
--   instant: confirmed (paid when persisted) | failed
--   hold:    reserved → paid | cancelled | expired; or failed
-- `pay_by` is set for reserved orders. `unit_return` says where the unit of an order that did
-- not end paid stands: 'pending' (SQL gave it up, Redis has not taken it back yet) or 'done';
-- NULL when there is nothing to give back.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
  CHECK (status IN ('confirmed', 'reserved', 'paid', 'failed', 'cancelled', 'expired'));
ALTER TABLE orders
  ADD COLUMN pay_by      timestamptz,
  ADD COLUMN ended_at    timestamptz,
  ADD COLUMN unit_return text CHECK (unit_return IS NULL OR unit_return IN ('pending', 'done'));

-- The user's n-th unit of a round is held by one order at most, whichever state holds it.
DROP INDEX orders_one_unit_per_user;
CREATE UNIQUE INDEX orders_one_unit_per_user ON orders (product_id, round, user_id, unit_no)
  WHERE status IN ('confirmed', 'reserved', 'paid');
-- The expiry sweeper's scan, and the return of pending units after a crash.
CREATE INDEX orders_reserved_by_deadline ON orders (product_id, pay_by) WHERE status = 'reserved';
CREATE INDEX orders_unit_return_pending ON orders (product_id) WHERE unit_return = 'pending';

-- Refunds are not issued by the service today; the column exists so that the books' invariant is
-- stated once, in full.
