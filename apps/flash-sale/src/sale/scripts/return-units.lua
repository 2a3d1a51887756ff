-- Gives units back to a sale: orders that reserved a unit in Redis and did not end paid
-- (insufficient funds, a unit reserved twice for one user, cancelled, expired), or were refunded. Each order gives
-- its unit back at most once, whoever asks and however often (a redelivered event, a sweeper
-- retrying after a crash, two sweepers): `returned` remembers the orders that did, in the same
-- slot and the same atomic script as the stock it raises, so a failover keeps both or neither.
-- The user's buyer record drops the unit and frees its unit number (reserve.lua: the next
-- reservation takes the lowest free number, so it never collides with a live order's), the order's status in Redis shows
-- why, and if anything came back the sale's epoch grows and every instance is told on the sale's
-- channel, so none keeps answering "sold out" from memory (sale/sale-snapshots.ts).
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] buyers  KEYS[4] status  KEYS[5] returned (hash)
-- ARGV[1] the sale's channel  ARGV[2] the round the orders belong to
-- then 3 per order: order id, user id, reason (domain/order-states.ts ReturnReason; the order's
--   status in Redis becomes 'cancelled', 'expired' or 'refunded' for those reasons, 'failed' for
--   the others)
--
-- Returns { epoch, stock, then one code per order: 1 = returned now, 0 = returned before,
-- -1 = not returned: the sale is in another round (a reset dropped that round's stock) }
-- parse_buyer: lib/buyer-record.lua, put in front of this file by sale-store.ts.

-- The record without `order_id`: its slot freed (a record written before slots existed frees its
-- highest unknown one), trailing free slots dropped, `last` the highest live order left.
local function drop_unit(record, order_id)
  -- A malformed record (written by hand?) counts as nothing bought, so it is dropped below:
  -- the unit still goes back, and the user can buy again.
  local ok, count, last, slots = pcall(parse_buyer, record)
  if not ok then count, last, slots = 0, '', {} end
  local at
  for n = 1, #slots do
    if slots[n] == order_id then at = n end
  end
  if not at then
    for n = #slots, 1, -1 do
      if slots[n] == '?' then
        at = n
        break
      end
    end
  end
  if at then slots[at] = '' end
  while #slots > 0 and slots[#slots] == '' do slots[#slots] = nil end
  if last == order_id then
    last = ''
    for n = #slots, 1, -1 do
      if slots[n] ~= '' and slots[n] ~= '?' then
        last = slots[n]
        break
      end
    end
  end
  return count - 1, last .. '|' .. table.concat(slots, ',')
end

local round = redis.call('HGET', KEYS[1], 'round')
local out = { 0, 0 }
local any = false
for i = 3, #ARGV, 3 do
  local order_id, user, reason = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if round ~= ARGV[2] then
    out[#out + 1] = -1
  elseif redis.call('HSETNX', KEYS[5], order_id, reason) == 0 then
    out[#out + 1] = 0
  else
    redis.call('INCR', KEYS[2])
    local bought = redis.call('HGET', KEYS[3], user)
    if bought then
      local n, rest = drop_unit(bought, order_id)
      if n <= 0 then
        redis.call('HDEL', KEYS[3], user)
      else
        redis.call('HSET', KEYS[3], user, n .. '|' .. rest)
      end
    end
    if redis.call('HEXISTS', KEYS[4], order_id) == 1 then
      local status = 'failed'
      if reason == 'cancelled' or reason == 'expired' or reason == 'refunded' then status = reason end
      redis.call('HSET', KEYS[4], order_id, status .. '|' .. user .. '|' .. round)
    end
    any = true
    out[#out + 1] = 1
  end
end
if any then
  out[1] = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
  redis.call('SPUBLISH', ARGV[1], 'epoch ' .. out[1])
else
  out[1] = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
end
out[2] = tonumber(redis.call('GET', KEYS[2]) or '0')
return out
