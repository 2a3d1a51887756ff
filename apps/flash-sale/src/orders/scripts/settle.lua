-- Marks an order event as done once the worker has persisted it in SQL: XACK, and the order's
-- status in Redis becomes confirmed or failed (only if it is still there: a sale reset drops the
-- statuses of its old round, and GET /v1/orders then answers from SQL).
--
-- KEYS[1] orders (stream)  KEYS[2] status (hash)
-- ARGV[1] group  ARGV[2] entry id  ARGV[3] order id  ARGV[4] 'confirmed' | 'failed'
-- Returns the number of entries acknowledged (0 if another worker already did).
local current = redis.call('HGET', KEYS[2], ARGV[3])
if current then
  local rest = string.match(current, '^[^|]*(|.*)$') or ''
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4] .. rest)
end
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
