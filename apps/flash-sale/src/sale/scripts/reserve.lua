-- Reserves one unit of a sale, all or nothing: idempotency key, sale window, per-user limit,
-- stock, the buyer record, the order's status and its event on the sale's stream (the outbox
-- the workers persist from). Every key carries the sale's hash tag: one slot, one atomic script.
--
-- KEYS[1] meta (hash)   KEYS[2] stock (int)   KEYS[3] buyers (hash)   KEYS[4] idem (hash)
-- KEYS[5] status (hash) KEYS[6] orders (stream)
-- ARGV[1] user id   ARGV[2] order id to use if a unit is reserved   ARGV[3] idempotency key or ''
--
-- Returns { code, order_id, remaining, replayed }, code one of RESERVED, SOLD_OUT,
-- ALREADY_PURCHASED, SALE_NOT_STARTED, SALE_ENDED, UNKNOWN_PRODUCT, IDEMPOTENCY_KEY_REUSED.
-- Time is the server's (TIME), so pods with skewed clocks agree on the sale window.
local user, order_id, idem_key = ARGV[1], ARGV[2], ARGV[3]

local function answer(code, oid, remaining)
  if idem_key ~= '' then
    redis.call('HSET', KEYS[4], idem_key, code .. '|' .. oid .. '|' .. user)
  end
  return { code, oid, remaining, 0 }
end

if idem_key ~= '' then
  local stored = redis.call('HGET', KEYS[4], idem_key)
  if stored then
    local code, oid, owner = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
    if owner ~= user then return { 'IDEMPOTENCY_KEY_REUSED', '', -1, 1 } end
    return { code, oid, tonumber(redis.call('GET', KEYS[2]) or '0'), 1 }
  end
end

local meta = redis.call('HMGET', KEYS[1], 'round', 'starts_at_ms', 'ends_at_ms', 'per_user_limit', 'price_cents')
if not meta[1] then return { 'UNKNOWN_PRODUCT', '', -1, 0 } end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local remaining = tonumber(redis.call('GET', KEYS[2]) or '0')
if now < tonumber(meta[2]) then return answer('SALE_NOT_STARTED', '', remaining) end
local ends = tonumber(meta[3])
if ends > 0 and now >= ends then return answer('SALE_ENDED', '', remaining) end

local count, last = 0, ''
local bought = redis.call('HGET', KEYS[3], user)
if bought then
  local c, o = string.match(bought, '^(%d+)|(.*)$')
  count, last = tonumber(c), o
end
if count >= tonumber(meta[4]) then return answer('ALREADY_PURCHASED', last, remaining) end
if remaining <= 0 then return answer('SOLD_OUT', '', 0) end

remaining = redis.call('DECR', KEYS[2])
redis.call('HSET', KEYS[3], user, (count + 1) .. '|' .. order_id)
redis.call('HSET', KEYS[5], order_id, 'reserved|' .. user .. '|' .. meta[1])
redis.call('XADD', KEYS[6], '*', 'order_id', order_id, 'user_id', user, 'round', meta[1],
  'unit', count + 1, 'price_cents', meta[5], 'reserved_at', now)
return answer('RESERVED', order_id, remaining)
