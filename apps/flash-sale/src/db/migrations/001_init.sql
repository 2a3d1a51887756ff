-- The catalog, the sales and what they sold. Amounts are integer cents.
CREATE TABLE products (
  product_id   text PRIMARY KEY,
  name         text NOT NULL,
  price_cents  bigint NOT NULL CHECK (price_cents >= 0),
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per product on sale. `round` grows with every reset; `sold` is the second guard
-- against overselling (the worker increments it only while sold < stock_total; the CHECK is the
-- third). `fence` is the last Redlock fencing token that wrote the row (redlock strategy).
CREATE TABLE sales (
  product_id      text PRIMARY KEY REFERENCES products (product_id),
  round           integer NOT NULL,
  stock_total     integer NOT NULL CHECK (stock_total >= 0),
  sold            integer NOT NULL DEFAULT 0 CHECK (sold >= 0),
  per_user_limit  integer NOT NULL DEFAULT 1 CHECK (per_user_limit >= 1),
  starts_at       timestamptz,
  ends_at         timestamptz,
  fence           bigint NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (sold <= stock_total)
);

CREATE TABLE orders (
  order_id        text PRIMARY KEY,
  product_id      text NOT NULL,
  round           integer NOT NULL,
  user_id         text NOT NULL,
  unit_no         integer NOT NULL,
  price_cents     bigint NOT NULL,
  status          text NOT NULL CHECK (status IN ('confirmed', 'failed')),
  failure_reason  text,
  strategy        text NOT NULL,
  reserved_at     timestamptz,
  persisted_at    timestamptz NOT NULL DEFAULT now()
);
-- A user's n-th unit of a round exists once: no user buys twice beyond the limit, whatever Redis
-- lost in a failover.
CREATE UNIQUE INDEX orders_one_unit_per_user ON orders (product_id, round, user_id, unit_no)
  WHERE status = 'confirmed';
CREATE INDEX orders_by_sale ON orders (product_id, round, status);

-- At most one charge per order (primary key), written in the order's transaction.
CREATE TABLE payments (
  order_id      text PRIMARY KEY REFERENCES orders (order_id),
  user_id       text NOT NULL,
  amount_cents  bigint NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE wallets (
  user_id        text PRIMARY KEY,
  charged_cents  bigint NOT NULL DEFAULT 0,
  charges        integer NOT NULL DEFAULT 0
);

-- Answers of the redlock strategy per Idempotency-Key (the lua strategy keeps them in Redis).
-- A row without status is a request in progress; its repeats wait for the answer.
CREATE TABLE idempotency (
  product_id  text NOT NULL,
  idem_key    text NOT NULL,
  user_id     text NOT NULL,
  status      integer,
  body        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (product_id, idem_key)
);
