-- Marks order events as done once the worker has persisted them in SQL: XACK, and each order's
-- status in Redis becomes confirmed or failed (only if it is still there: a sale reset drops the
-- statuses of its old round, and GET /v1/orders then answers from SQL). One call settles a whole
-- batch of one sale (issue 15: one call per event was the worker's Redis bill), with three
-- commands for up to 1,000 entries (issue 24): one HMGET of the statuses, one HSET of those that
-- change, one XACK of every entry.
--
-- The entries' persisting attempts end here too (begin-attempts.lua): HDEL from KEYS[3].
--
-- KEYS[1] orders (stream)  KEYS[2] status (hash)  KEYS[3] attempts (hash)
-- ARGV[1] group, then triples: ARGV[2+3i] entry id, ARGV[3+3i] order id,
--   ARGV[4+3i] the order's status in SQL (domain/order-states.ts). 'reserved' (a hold sale's
--   order) is what Redis already says: it is not written, so a redelivered event cannot undo a
--   pay or cancel recorded meanwhile (GET /v1/orders answers a reserved order from SQL).
-- Returns the number of entries acknowledged (fewer if another worker already did).
-- Lua's unpack takes a few thousand values at most: a batch larger than CHUNK goes in parts.
local CHUNK = 1000
local function each_chunk(list, fn)
  for from = 1, #list, CHUNK do fn(unpack(list, from, math.min(from + CHUNK - 1, #list))) end
end
local ids, orders, wanted = {}, {}, {}
for i = 2, #ARGV, 3 do
  ids[#ids + 1] = ARGV[i]
  if ARGV[i + 2] ~= 'reserved' then
    orders[#orders + 1] = ARGV[i + 1]
    wanted[#wanted + 1] = ARGV[i + 2]
  end
end
local current = {}
each_chunk(orders, function(...)
  for _, v in ipairs(redis.call('HMGET', KEYS[2], ...)) do current[#current + 1] = v end
end)
local writes, index = {}, {}
for i, order_id in ipairs(orders) do
  if current[i] then
    local rest = string.match(current[i], '^[^|]*(|.*)$') or ''
    -- An order twice in one batch (a redelivery beside its first delivery): its last word.
    if index[order_id] then
      writes[index[order_id] + 1] = wanted[i] .. rest
    else
      writes[#writes + 1] = order_id
      writes[#writes + 1] = wanted[i] .. rest
      index[order_id] = #writes - 1
    end
  end
end
each_chunk(writes, function(...) redis.call('HSET', KEYS[2], ...) end)
local acked = 0
each_chunk(ids, function(...)
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], ...)
  redis.call('HDEL', KEYS[3], ...)
end)
return acked
