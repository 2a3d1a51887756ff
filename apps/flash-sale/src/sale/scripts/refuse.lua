-- The refusals of a sold-out sale for checkouts with an Idempotency-Key, answered by an
-- instance from its snapshot of the sale (sale/sale-snapshots.ts) and recorded before they are
-- sent, so that the key gets the same answer from then on, on every instance and after a
-- restock, as reserve.lua would have given. It never reserves: it cannot oversell whatever the
-- snapshot says. One call per sale per event-loop turn.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] idem
-- ARGV[1] the snapshot's epoch, then 4 per checkout: user id, idempotency key, code, order id
--   (the answer the snapshot gives: SOLD_OUT, ALREADY_PURCHASED with the order, SALE_ENDED)
-- Returns 3 per checkout: code, order_id, replayed (1 = the key's stored answer); or the single
-- code STALE for all of them when the sale is no longer sold out at that epoch (nothing recorded:
-- they go through reserve.lua).
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch ~= ARGV[1] or tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then return { 'STALE' } end
local out = {}
for i = 2, #ARGV, 4 do
  local user, key, code, oid = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  -- A first use of the key (the common case: a new click) costs one command; a key with an
  -- answer already costs a second, to read it.
  if redis.call('HSETNX', KEYS[3], key, code .. '|' .. oid .. '|' .. user) == 1 then
    out[#out + 1], out[#out + 2], out[#out + 3] = code, oid, 0
  else
    local stored = redis.call('HGET', KEYS[3], key)
    local c, o, owner = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
    if owner ~= user then
      out[#out + 1], out[#out + 2], out[#out + 3] = 'IDEMPOTENCY_KEY_REUSED', '', 1
    else
      out[#out + 1], out[#out + 2], out[#out + 3] = c, o, 1
    end
  end
end
return out
