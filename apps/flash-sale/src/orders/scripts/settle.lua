-- Marks order events as done once the worker has persisted them in SQL: XACK, and each order's
-- status in Redis becomes confirmed or failed (only if it is still there: a sale reset drops the
-- statuses of its old round, and GET /v1/orders then answers from SQL). One call settles a whole
-- batch of one sale (issue 15: one call per event was the worker's Redis bill).
--
-- KEYS[1] orders (stream)  KEYS[2] status (hash)
-- ARGV[1] group, then triples: ARGV[2+3i] entry id, ARGV[3+3i] order id,
--   ARGV[4+3i] the order's status in SQL (domain/order-states.ts). 'reserved' (a hold sale's
--   order) is what Redis already says: it is not written, so a redelivered event cannot undo a
--   pay or cancel recorded meanwhile (GET /v1/orders answers a reserved order from SQL).
-- Returns the number of entries acknowledged (fewer if another worker already did).
local acked = 0
for i = 2, #ARGV, 3 do
  local order_id, status = ARGV[i + 1], ARGV[i + 2]
  local current = redis.call('HGET', KEYS[2], order_id)
  if current and status ~= 'reserved' then
    local rest = string.match(current, '^[^|]*(|.*)$') or ''
    redis.call('HSET', KEYS[2], order_id, status .. rest)
  end
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
end
return acked
