-- Reserves units of one sale for a batch of checkouts (one event-loop turn of one instance), in
-- arrival order, each answered exactly as if it had run alone: idempotency key, sale window,
-- per-user limit, stock, the buyer record, the order's status and its event on the sale's stream
-- (the outbox the workers persist from), all or nothing per checkout. One call per batch instead
-- of one per checkout: Redis calls follow instances x turns, not requests (issue 15). Every key
-- carries the sale's hash tag: one slot, one atomic script.
--
-- Commands follow batches too (issue 24): the batch's idempotency answers and buyer records are
-- read with one HMGET each, every checkout's effects are kept in Lua tables (so a later checkout
-- of the batch sees what an earlier one did, as if they had run one after the other), and they
-- are written once at the end: one DECRBY, one HSET per hash. The XADD of a reservation is the
-- only command per checkout. A reserved checkout's XADD runs before any of its effects is kept,
-- so a checkout that fails inside the script (ERROR) leaves nothing behind.
--
-- Run twice = run once (issue 37): a connection that drops between the script's run and its reply
-- makes the Cluster client send the same call again. A checkout whose order id already has a
-- status was reserved by an earlier run of this very call: it is answered RESERVED (replayed)
-- and nothing is done again, whatever the idempotency key and the buyer record say now.
--
-- Unit numbers (issue 37): a user's reservation takes the lowest unit number that none of the
-- user's live orders holds (the buyer record lists them), never count + 1: after a return, count + 1
-- can be the number a live order still holds, which SQL's unique index (product, round, user,
-- unit_no) over live orders refuses (duplicate_unit) after the user was answered 200.
-- Buyer record: "<live units>|<last live order id>|<slots>", slots = order ids by unit number,
-- comma-separated, '' for a free number. A record without slots ("<count>|<last>", written before
-- this format) counts its units as numbers 1..count held by unknown orders ('?').
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
-- UNKNOWN_PRODUCT, IDEMPOTENCY_KEY_REUSED. Three more that are not answers: ROOM_CHECK (the sale has
-- a waiting room this instance did not check: nothing was done, go through the gate),
-- SALE_RESETTING (a reset closed this round and has not opened the next: nothing was done, retry)
-- and ERROR (this checkout failed inside the script, order_id holds the error; the others are
-- unaffected).
-- Time is the server's (TIME), so pods with skewed clocks agree on the sale window. The checkout
-- that sells the last unit publishes 'sold-out <epoch>' on the channel.
local meta = redis.call('HMGET', KEYS[1], 'round', 'starts_at_ms', 'ends_at_ms', 'per_user_limit',
  'price_cents', 'epoch', 'payment', 'hold_seconds', 'closing')
-- A reset under way (close-round.lua): this round is closed, the next one not open yet.
local closing = meta[9] and meta[9] ~= ''
local epoch = tonumber(meta[6] or '0')
local room = redis.call('HGET', KEYS[7], 'gen')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- As text once: a number turned into text costs a formatted print each time (13 digits: exact).
local now_text = tostring(now)
local remaining = tonumber(redis.call('GET', KEYS[2]) or '0')
local had_stock = remaining > 0

-- The batch's view of the idempotency and buyer hashes: what Redis holds (false: nothing), then
-- what this batch wrote. `dirty` lists the fields to write at the end, each once, in first-write
-- order.
local function view(key, fields)
  local values, seen = {}, {}
  local list = {}
  for _, f in ipairs(fields) do
    if not seen[f] then
      seen[f] = true
      list[#list + 1] = f
    end
  end
  if #list > 0 then
    local got = redis.call('HMGET', key, unpack(list))
    for i, f in ipairs(list) do values[f] = got[i] end
  end
  return { values = values, dirty = {}, marked = {} }
end
local function put(v, field, value)
  v.values[field] = value
  if not v.marked[field] then
    v.marked[field] = true
    v.dirty[#v.dirty + 1] = field
  end
end
local function flush(key, v)
  if #v.dirty == 0 then return end
  local args = {}
  for _, f in ipairs(v.dirty) do
    args[#args + 1] = f
    args[#args + 1] = v.values[f]
  end
  redis.call('HSET', key, unpack(args))
end

local idem_keys, users, order_ids = {}, {}, {}
for i = 2, #ARGV, 4 do
  if ARGV[i + 2] ~= '' then idem_keys[#idem_keys + 1] = ARGV[i + 2] end
  users[#users + 1] = ARGV[i]
  order_ids[#order_ids + 1] = ARGV[i + 1]
end
local idem = view(KEYS[4], idem_keys)
-- Buyer records matter only for a sale that exists.
local buyers = view(KEYS[3], meta[1] and users or {})
-- The batch's order ids: one with a status already is this call run a second time.
local statuses = view(KEYS[5], meta[1] and order_ids or {})
local sold = 0

-- parse_buyer: lib/buyer-record.lua, put in front of this file by sale-store.ts.

local function one(user, order_id, idem_key, checked)
  local function answer(code, oid)
    if idem_key ~= '' then put(idem, idem_key, code .. '|' .. oid .. '|' .. user) end
    return code, oid, 0
  end
  if idem_key ~= '' then
    local stored = idem.values[idem_key]
    if stored then
      local code, oid, owner = string.match(stored, '^([^|]*)|([^|]*)|(.*)$')
      if owner ~= user then return 'IDEMPOTENCY_KEY_REUSED', '', 1 end
      return code, oid, 1
    end
  end
  if not meta[1] then return 'UNKNOWN_PRODUCT', '', 0 end
  -- Reserved by an earlier run of this same call (its reply was lost): the same answer again.
  -- (Its key, if any, recorded that answer in the same run, and was found above.)
  if statuses.values[order_id] then return 'RESERVED', order_id, 1 end
  -- Not an answer to keep: the same key gets the new round's answer once it is open.
  if closing then return 'SALE_RESETTING', '', 0 end
  if room and checked ~= room then return 'ROOM_CHECK', '', 0 end
  -- Not recorded under the key: "not yet" is no answer to keep; the same key buys after the start.
  if now < tonumber(meta[2]) then return 'SALE_NOT_STARTED', '', 0 end
  local ends = tonumber(meta[3])
  if ends > 0 and now >= ends then return answer('SALE_ENDED', '') end
  local count, last, slots = parse_buyer(buyers.values[user])
  if count >= tonumber(meta[4]) then return answer('ALREADY_PURCHASED', last) end
  if remaining <= 0 then return answer('SOLD_OUT', '') end
  -- The lowest unit number no live order of the user holds.
  local unit = #slots + 1
  for n = 1, #slots do
    if slots[n] == '' then
      unit = n
      break
    end
  end
  -- The one command of its own; if it fails, nothing of this checkout has been kept.
  redis.call('XADD', KEYS[6], '*', 'order_id', order_id, 'user_id', user, 'round', meta[1],
    'unit', unit, 'price_cents', meta[5], 'reserved_at', now_text)
  remaining = remaining - 1
  sold = sold + 1
  slots[unit] = order_id
  put(buyers, user, (count + 1) .. '|' .. order_id .. '|' .. table.concat(slots, ','))
  -- The reservation's time last: a replayed answer of a hold sale computes its pay_by from it.
  put(statuses, order_id, 'reserved|' .. user .. '|' .. meta[1] .. '|' .. now_text)
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
-- The batch's effects, stock first: after any XADD the script may no longer fail part way for
-- memory (Redis lets a script that has written go on writing), so these writes all land.
if sold > 0 then remaining = redis.call('DECRBY', KEYS[2], sold) end
flush(KEYS[3], buyers)
flush(KEYS[5], statuses)
flush(KEYS[4], idem)
out[2] = remaining
if had_stock and remaining <= 0 then redis.call('SPUBLISH', ARGV[1], 'sold-out ' .. epoch) end
return out
