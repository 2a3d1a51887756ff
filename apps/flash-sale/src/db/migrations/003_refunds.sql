-- Refunds (POST /admin/orders/:order_id/refund): a paid order (confirmed, or paid after a hold)
-- can be refunded once. The order becomes 'refunded', its unit goes back to the sale through the
-- same return path as a cancelled order (unit_return 'pending' → 'done'), and the wallet gets the
-- charge back (balance and refunded_cents up by the payment's amount), so the books' invariant
-- balance = funded − charged + refunded keeps holding.

ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check
  CHECK (status IN ('confirmed', 'reserved', 'paid', 'failed', 'cancelled', 'expired', 'refunded'));

-- One refund per payment, at most: the primary key is the last guard (the refund itself runs with
-- the order's row locked). The amount is the payment's, all of it.
CREATE TABLE refunds (
  order_id      text PRIMARY KEY REFERENCES payments (order_id),
  user_id       text NOT NULL,
  amount_cents  bigint NOT NULL CHECK (amount_cents > 0),
  created_at    timestamptz NOT NULL DEFAULT now()
);
