-- One join or poll of a sale's waiting room. First the caller's own place (a new one on join;
-- on poll, a place its signed ticket proves but Redis lost in a failover is put back), then the
-- room is advanced lazily (no background process): lapsed admissions and places not polled for
-- drop_after_ms are removed, admitted users who bought are retired, and users are admitted up to
-- admit_per_second × elapsed (a token bucket holding one second's worth), within max_admitted
-- and k × the units left. Then the answer for the caller. Atomic on the sale's slot.
--
-- Order keys: users who join before starts_at get their lottery rank, the first 48 bits of
-- HMAC-SHA1(lottery secret, user id) (below 2^48); later users the server time in µs (above it,
-- and strictly increasing), so the draw comes first, then first come, first served.
--
-- KEYS[1] room (hash)  KEYS[2] waiting (zset)  KEYS[3] seen (zset)  KEYS[4] admitted (zset)
-- KEYS[5] users (hash) KEYS[6] draw (zset)     KEYS[7] sale meta (hash, read)
-- KEYS[8] sale stock (int, read)               KEYS[9] sale buyers (hash, read)
-- ARGV[1] 'join' | 'poll'   ARGV[2] user id
-- ARGV[3] poll: the ticket's generation        ARGV[4] poll: the ticket's order key
--
-- Returns { 'OFF' } (no room), { 'UNKNOWN_PRODUCT' }, { 'STALE' } (poll: the ticket is of an
-- earlier room), or { status, reason, position, eta_ms, order_key, generation,
-- admitted_until_ms, order_id, starts_at_ms, measured_rate_milli, waiting, admitted,
-- admitted_now, dropped_now, expired_now, wait_ms... } with status waiting | admitted | sold_out
-- | closed, reason '' | sale_ended | purchased | dropped | admission_expired, -1 for "none".
local mode, user = ARGV[1], ARGV[2]

local function int(x) return string.format('%.0f', x) end

local cfg = redis.call('HMGET', KEYS[1], 'gen', 'admit_per_second', 'max_admitted', 'admission_ms',
  'stock_factor', 'drop_after_ms', 'secret', 'tokens', 'tokens_ms', 'last_key', 'sweep_ms',
  'sweep_offset', 'created_ms')
if not cfg[1] then return { 'OFF' } end
local gen = cfg[1]
if mode == 'poll' and ARGV[3] ~= gen then return { 'STALE' } end
local meta = redis.call('HMGET', KEYS[7], 'starts_at_ms', 'ends_at_ms', 'per_user_limit')
if not meta[1] then return { 'UNKNOWN_PRODUCT' } end

local rate, max_admitted, admission_ms = tonumber(cfg[2]), tonumber(cfg[3]), tonumber(cfg[4])
local k, drop_ms, secret = tonumber(cfg[5]), tonumber(cfg[6]), cfg[7]
local tokens, tokens_ms, last_key = tonumber(cfg[8]), tonumber(cfg[9]), tonumber(cfg[10])
local sweep_ms, sweep_offset, created_ms = tonumber(cfg[11]), tonumber(cfg[12]), tonumber(cfg[13])
local starts, ends, limit = tonumber(meta[1]), tonumber(meta[2]), tonumber(meta[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local opens = math.max(starts, created_ms)
local started = now >= starts
local ended = ends > 0 and now >= ends
local remaining = tonumber(redis.call('GET', KEYS[8]) or '0')

-- Users: state w(aiting) a(dmitted) b(ought) d(ropped) x (admission lapsed).
local function read(u)
  local v = redis.call('HGET', KEYS[5], u)
  if not v then return nil end
  local s, key, joined, till = string.match(v, '^(%a)|(%d+)|(%d+)|(%d+)$')
  return { state = s, key = key, joined = tonumber(joined), till = tonumber(till) }
end
local function write(u, r)
  redis.call('HSET', KEYS[5], u, r.state .. '|' .. r.key .. '|' .. int(r.joined) .. '|' .. int(r.till))
end

local function unhex(h)
  return (string.gsub(h, '..', function(c) return string.char(tonumber(c, 16)) end))
end
-- RFC 2104 over redis.sha1hex (Redis' Lua has SHA-1 and the bit library, not SHA-256).
local function hmac_sha1(key, msg)
  if #key > 64 then key = unhex(redis.sha1hex(key)) end
  key = key .. string.rep('\0', 64 - #key)
  local inner, outer = {}, {}
  for i = 1, 64 do
    local b = string.byte(key, i)
    inner[i] = string.char(bit.bxor(b, 0x36))
    outer[i] = string.char(bit.bxor(b, 0x5c))
  end
  return redis.sha1hex(table.concat(outer) .. unhex(redis.sha1hex(table.concat(inner) .. msg)))
end

local function new_key(u)
  if not started then
    local rank = tonumber(string.sub(hmac_sha1(secret, u), 1, 12), 16)
    redis.call('ZADD', KEYS[6], int(rank), u)
    return int(rank)
  end
  last_key = math.max(now_us, last_key + 1)
  redis.call('HSET', KEYS[1], 'last_key', int(last_key))
  return int(last_key)
end

local function place(u, key)
  local r = { state = 'w', key = key, joined = now, till = 0 }
  write(u, r)
  redis.call('ZADD', KEYS[2], key, u)
  redis.call('ZADD', KEYS[3], int(now), u)
  local n = tonumber(key)
  if n > last_key and n >= 281474976710656 then
    last_key = n
    redis.call('HSET', KEYS[1], 'last_key', key)
  end
  return r
end

-- 1. The caller's place. Joining again keeps the place; a dropped or lapsed user starts anew.
local me = read(user)
if not ended then
  if mode == 'join' then
    if not me or me.state == 'd' or me.state == 'x' then me = place(user, new_key(user)) end
  elseif not me then
    me = place(user, ARGV[4])
  end
  if me and me.state == 'w' then redis.call('ZADD', KEYS[3], int(now), user) end
end
local order_id = ''
local bought = redis.call('HGET', KEYS[9], user)
if bought then
  -- "<live units>|<last live order>|<slots>" (sale/scripts/reserve.lua)
  local c, o = string.match(bought, '^(%d+)|([^|]*)')
  order_id = o
  if me and me.state ~= 'b' and tonumber(c) >= limit then
    redis.call('ZREM', KEYS[2], user)
    redis.call('ZREM', KEYS[3], user)
    redis.call('ZREM', KEYS[4], user)
    me.state = 'b'
    write(user, me)
  end
end

-- 2. Advance the room.
local admitted_now, dropped_now, expired_now, waits = 0, 0, 0, {}
if not ended then
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', int(now), 'LIMIT', 0, 500)
  for _, u in ipairs(lapsed) do
    redis.call('ZREM', KEYS[4], u)
    local r = read(u)
    if r then
      r.state = 'x'
      write(u, r)
    end
  end
  expired_now = #lapsed
  local idle = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. int(now - drop_ms), 'LIMIT', 0, 500)
  for _, u in ipairs(idle) do
    redis.call('ZREM', KEYS[2], u)
    redis.call('ZREM', KEYS[3], u)
    local r = read(u)
    if r then
      r.state = 'd'
      write(u, r)
    end
  end
  dropped_now = #idle
  -- Buyers are written by reserve.lua, which knows nothing of the room: every 200 ms up to 1,000
  -- admitted users are looked up there (round robin), and those done buying are retired.
  if now - sweep_ms >= 200 then
    local total = redis.call('ZCARD', KEYS[4])
    if sweep_offset >= total then sweep_offset = 0 end
    local batch = redis.call('ZRANGE', KEYS[4], sweep_offset, sweep_offset + 999)
    local done = 0
    if #batch > 0 then
      local counts = redis.call('HMGET', KEYS[9], unpack(batch))
      for i, u in ipairs(batch) do
        local c = counts[i] and tonumber(string.match(counts[i], '^(%d+)|'))
        if c and c >= limit then
          redis.call('ZREM', KEYS[4], u)
          local r = read(u)
          if r then
            r.state = 'b'
            write(u, r)
          end
          done = done + 1
        end
      end
    end
    sweep_offset = sweep_offset + #batch - done
    redis.call('HSET', KEYS[1], 'sweep_ms', int(now), 'sweep_offset', int(sweep_offset))
  end
  if started then
    local from = math.max(tokens_ms, opens)
    if now > from then
      tokens = math.min(math.max(rate, 1), tokens + rate * (now - from) / 1000)
      tokens_ms = now
    end
    local active = redis.call('ZCARD', KEYS[4])
    local room_left = math.min(max_admitted, math.floor(k * math.max(remaining, 0))) - active
    local n = math.min(math.floor(tokens), room_left)
    if n > 0 then
      local popped = redis.call('ZPOPMIN', KEYS[2], n)
      for i = 1, #popped, 2 do
        local u = popped[i]
        redis.call('ZREM', KEYS[3], u)
        redis.call('ZADD', KEYS[4], int(now + admission_ms), u)
        local r = read(u) or { key = popped[i + 1], joined = now }
        r.state, r.till = 'a', now + admission_ms
        write(u, r)
        -- Time in line while the sale was open (an early joiner's wait starts at the opening).
        waits[#waits + 1] = now - math.max(r.joined, opens)
        admitted_now = admitted_now + 1
      end
      tokens = tokens - admitted_now
      local sec = math.floor(now / 1000)
      local field = 'r' .. (sec % 10)
      local slot = redis.call('HGET', KEYS[1], field)
      local s, c = sec, 0
      if slot then
        local ss, cc = string.match(slot, '^(%d+):(%d+)$')
        if tonumber(ss) == sec then c = tonumber(cc) end
      end
      redis.call('HSET', KEYS[1], field, int(s) .. ':' .. int(c + admitted_now))
      redis.call('HINCRBY', KEYS[1], 'admitted_total', admitted_now)
    end
    redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'tokens_ms', int(tokens_ms))
  end
  if dropped_now > 0 then redis.call('HINCRBY', KEYS[1], 'dropped_total', dropped_now) end
  if expired_now > 0 then redis.call('HINCRBY', KEYS[1], 'expired_total', expired_now) end
end

-- 3. The answer, from the caller's record as the advance left it.
local measured = 0
do
  local sec = math.floor(now / 1000)
  local ring = redis.call('HMGET', KEYS[1], 'r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6', 'r7', 'r8', 'r9')
  local sum = 0
  for i = 1, 10 do
    if ring[i] then
      local s, c = string.match(ring[i], '^(%d+):(%d+)$')
      if sec - tonumber(s) <= 9 then sum = sum + tonumber(c) end
    end
  end
  -- The last 9 whole seconds and the current one so far, or less if the room opened since.
  local window = math.max(1, math.min(9 + (now % 1000) / 1000, (now - opens) / 1000))
  measured = sum / window
end
me = read(user)
local status, reason, position, eta_ms, till = 'closed', 'sale_ended', -1, -1, 0
if me and not ended then
  reason = ''
  if me.state == 'b' then
    reason = 'purchased'
  elseif me.state == 'd' then
    reason = 'dropped'
  elseif me.state == 'x' then
    reason = 'admission_expired'
  elseif me.state == 'a' then
    status, till = 'admitted', me.till
  else
    status = 'waiting'
    local rank = redis.call('ZRANK', KEYS[2], user)
    position = rank and rank + 1 or -1
    if not started then
      eta_ms = (starts - now) + position / rate * 1000
    elseif measured > 0 then
      eta_ms = position / measured * 1000
    elseif now - opens < 2000 then
      eta_ms = position / rate * 1000
    end
  end
  if remaining <= 0 and (status == 'waiting' or status == 'admitted') then status = 'sold_out' end
end
local reply = { status, reason, position, math.ceil(eta_ms), me and me.key or '', gen, till, order_id,
  starts, math.floor(measured * 1000), redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[4]),
  admitted_now, dropped_now, expired_now }
for _, w in ipairs(waits) do reply[#reply + 1] = w end
return reply
