-- The books' Redis side of one sale in one atomic read (issue 20): the units left, the order
-- events dead-lettered, and the order ids of every event the group has not settled yet (pending
-- in a consumer or not delivered at all), read from the entries themselves. Never from XINFO's
-- `lag`, which Redis 7.0 can leave stale after a failover (a group with nothing left to read
-- showing lag 118 for ever). Atomic, so a reservation is either in `remaining` and the entries,
-- or in neither.
--
-- KEYS[1] stock (string)  KEYS[2] orders (stream)  KEYS[3] dead (stream)
-- ARGV[1] group  ARGV[2] at most this many order ids (the rest: truncated = 1)
-- Returns { remaining or false, dead letters, truncated (0/1), lag as XINFO reports it or -1,
--   order id, order id, … }
local remaining = redis.call('GET', KEYS[1])
local dead = redis.call('XLEN', KEYS[3])
local cap = tonumber(ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 0 then
  return { remaining, dead, 0, -1 }
end
local last, lag = nil, -1
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local f = {}
  for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
  if f['name'] == ARGV[1] then
    last = f['last-delivered-id']
    if type(f['lag']) == 'number' then lag = f['lag'] end
  end
end
local out = { remaining, dead, 0, lag }
local function take(entry)
  if #out - 4 >= cap then
    out[3] = 1
    return false
  end
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'order_id' then
      out[#out + 1] = fields[i + 1]
      break
    end
  end
  return true
end
-- Delivered and not acknowledged: the pending entries list, entry by entry (an entry deleted
-- from the stream has nothing to settle).
local from = '-'
if last then
  for _, p in ipairs(redis.call('XPENDING', KEYS[2], ARGV[1], '-', '+', cap)) do
    local e = redis.call('XRANGE', KEYS[2], p[1], p[1])[1]
    if e and not take(e) then return out end
  end
  from = '(' .. last
end
-- Not delivered yet (without the group: every entry).
while true do
  local page = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', 1000)
  for _, e in ipairs(page) do
    if not take(e) then return out end
  end
  if #page < 1000 then break end
  from = '(' .. page[#page][1]
end
return out
