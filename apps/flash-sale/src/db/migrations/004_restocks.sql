-- Restocks as an outbox (issue 37 item 4). A restock was two commits: restock.lua ran inside the
-- open SQL transaction that raised stock_total, so Redis could keep units SQL rolled back (sold as
-- 200s that end sold_out_in_sql), SQL could keep units a failover took from Redis (never sold),
-- and the sales row stayed locked for as long as Redis took. Now the restock is committed in SQL
-- first, with an id; Redis applies it once per id (restock.lua) after the commit, and the row is
-- marked done only once a replica holds it (or the master is shown alone). A crash, an outage or
-- a lost confirmation leaves it pending, and the workers apply it again (at most once per id).
CREATE TABLE restocks (
  restock_id   bigserial PRIMARY KEY,
  product_id   text NOT NULL REFERENCES products (product_id),
  round        integer NOT NULL,
  units        integer NOT NULL CHECK (units > 0),
  -- pending: in SQL only so far; done: Redis holds it durably; stale: the sale was reset (a new
  -- round) before Redis took it, so the units went with the old round.
  state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'stale')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  applied_at   timestamptz
);
CREATE INDEX restocks_pending ON restocks (product_id) WHERE state = 'pending';
