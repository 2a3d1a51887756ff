-- Reserves units of one sale for a batch of checkouts (one event-loop turn of one instance), in
-- arrival order, each answered exactly as if it had run alone: idempotency key, sale window,
-- per-user limit, stock, the buyer record, the order's status and its event on the sale's stream
-- (the outbox the workers persist from), all or nothing per checkout. One call per batch instead
-- of one per checkout: Redis calls follow instances x turns, not requests (issue 15). Every key
-- carries the sale's hash tag: one slot, one atomic script.
--
-- KEYS[1] meta (hash)   KEYS[2] stock (int)   KEYS[3] buyers (hash)   KEYS[4] idem (hash)
-- KEYS[5] status (hash) KEYS[6] orders (stream)   KEYS[7] room (hash, read: its 'gen')
-- ARGV[1] the sale's notification channel (sharded pub/sub, the sale's slot)
-- then 4 per checkout: user id, order id to use if a unit is reserved, idempotency key or '',
--   the waiting room it was checked against: the generation of the room whose gate admitted it,
--   or '' when the instance knows of no room
--
-- Returns { epoch, remaining, room generation or '', the server time of the batch (ms: every
-- reservation of the batch is stamped with it, in its event and its status), the sale's
-- hold_seconds (0 for an instant sale: a reservation of a hold sale is to be paid by
-- that time + hold_seconds), then 3 per checkout: code, order_id, replayed (1 = a stored answer) }
-- with code one of RESERVED, SOLD_OUT, ALREADY_PURCHASED, SALE_NOT_STARTED, SALE_ENDED,
-- UNKNOWN_PRODUCT, IDEMPOTENCY_KEY_REUSED. Two more that are not answers: ROOM_CHECK (the sale has
-- a waiting room this instance did not check: nothing was done, go through the gate) and ERROR
-- (this checkout failed inside the script, order_id holds the error; the others are unaffected).
-- Time is the server's (TIME), so pods with skewed clocks agree on the sale window. The checkout
-- that sells the last unit publishes 'sold-out <epoch>' on the channel.
local meta = redis.call('HMGET', KEYS[1], 'round', 'starts_at_ms', 'ends_at_ms', 'per_user_limit',
  'price_cents', 'epoch', 'payment', 'hold_seconds')
local epoch = tonumber(meta[6] or '0')
local room = redis.call('HGET', KEYS[7], 'gen')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local remaining = tonumber(redis.call('GET', KEYS[2]) or '0')
local had_stock = remaining > 0

local function one(user, order_id, idem_key, checked)
  local function answer(code, oid)
    if idem_key ~= '' then
      redis.call('HSET', KEYS[4], idem_key, code .. '|' .. oid .. '|' .. user)
    end
    return code, oid, 0
  end
  if idem_key ~= '' then
    local stored = redis.call('HGET', KEYS[4], idem_key)
    if stored then
      local code, oid, owner = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
      if owner ~= user then return 'IDEMPOTENCY_KEY_REUSED', '', 1 end
      return code, oid, 1
    end
  end
  if not meta[1] then return 'UNKNOWN_PRODUCT', '', 0 end
  if room and checked ~= room then return 'ROOM_CHECK', '', 0 end
  -- Not recorded under the key: "not yet" is no answer to keep; the same key buys after the start.
  if now < tonumber(meta[2]) then return 'SALE_NOT_STARTED', '', 0 end
  local ends = tonumber(meta[3])
  if ends > 0 and now >= ends then return answer('SALE_ENDED', '') end
  local count, last = 0, ''
  local bought = redis.call('HGET', KEYS[3], user)
  if bought then
    local c, o = string.match(bought, '^(%d+)|(.*)$')
    count, last = tonumber(c), o
  end
  if count >= tonumber(meta[4]) then return answer('ALREADY_PURCHASED', last) end
  if remaining <= 0 then return answer('SOLD_OUT', '') end
  remaining = redis.call('DECR', KEYS[2])
  redis.call('HSET', KEYS[3], user, (count + 1) .. '|' .. order_id)
  -- The reservation's time last: a replayed answer of a hold sale computes its pay_by from it.
  redis.call('HSET', KEYS[5], order_id, 'reserved|' .. user .. '|' .. meta[1] .. '|' .. now)
  redis.call('XADD', KEYS[6], '*', 'order_id', order_id, 'user_id', user, 'round', meta[1],
    'unit', count + 1, 'price_cents', meta[5], 'reserved_at', now)
  return answer('RESERVED', order_id)
end

local hold = 0
if meta[7] == 'hold' then hold = tonumber(meta[8] or '0') end
local out = { epoch, 0, room or '', now, hold }
for i = 2, #ARGV, 4 do
  local ok, code, oid, replayed = pcall(one, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
  if ok then
    out[#out + 1] = code
    out[#out + 1] = oid
    out[#out + 1] = replayed
  else
    out[#out + 1] = 'ERROR'
    -- A failed redis.call raises a table { err = '…' }; a Lua error raises a string.
    out[#out + 1] = type(code) == 'table' and tostring(code.err) or tostring(code)
    out[#out + 1] = 0
  end
end
out[2] = remaining
if had_stock and remaining <= 0 then redis.call('SPUBLISH', ARGV[1], 'sold-out ' .. epoch) end
return out
