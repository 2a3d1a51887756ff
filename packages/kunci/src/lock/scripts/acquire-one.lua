--[[
  acquire-one.lua: the common acquire, straight-line: ONE request for ONE resource, no hand-over.

  The same decisions as acquire.lua's single-resource path (which serves batches, several
  resources and hand-overs), without its batch loop, its packed fields and their string.match:
  at concurrency 1 every request comes alone, and a profile showed the script's own overhead,
  not its Redis calls, was most of its time. The node link sends this when a request is alone in
  its tick, and packs it into acquire.lua when several requests share a tick.

  KEYS[1] lock key, KEYS[2] fence key, KEYS[3] queue key (see acquire.lua)
  ARGV[1] token (32 characters), ARGV[2] ttl (ms), ARGV[3] proposed fence (integer)
  ARGV[4..6], only for a caller that will wait: waiter id, since (ms), queued ("1" if an earlier
  attempt queued it)
  A waiter marks the holder's key only when it holds an unmarked kunci token (32 lowercase hex
  characters): a value another client wrote is left byte-for-byte as it is.
  Returns a bare integer on the common paths (no Lua table to build, no array to parse):
    fence          granted: the proposed fence (ARGV[3], > 0)
    -(pttl + 3)    held by another token (< 0; pttl is -1 for a key without TTL)
  and {2, f, 0} when fenced (rare: the proposal was not above f, stored here).
  node-ops.ts turns these into acquire.lua's per-request triple.
]]
local TOKEN_LENGTH = 32
local lk = KEYS[1]
if redis.call('SET', lk, ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = tonumber(ARGV[3])
  local old = redis.call('SET', KEYS[2], ARGV[3], 'GET')
  if old and tonumber(old) >= fence then
    redis.call('SET', KEYS[2], old)
    redis.call('DEL', lk)
    return {2, tonumber(old), 0}
  end
  -- A queued caller that got the lock marks it if others still wait (see acquire.lua).
  if ARGV[6] == '1' then
    redis.call('ZREM', KEYS[3], ARGV[4])
    if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('SETRANGE', lk, TOKEN_LENGTH, '!') end
  end
  return fence
end
local pttl = redis.call('PTTL', lk)
if ARGV[4] then
  -- Only a kunci token is marked: a value another client wrote is never changed (its owner's
  -- compare-and-delete must still find it). Its holder's release then wakes nobody: we poll.
  local v = redis.call('GET', lk)
  if v and #v == TOKEN_LENGTH and not string.find(v, '[^0-9a-f]') then
    redis.call('SETRANGE', lk, TOKEN_LENGTH, '!')
  end
  redis.call('ZADD', KEYS[3], 'NX', ARGV[5], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], 2 * tonumber(ARGV[2]) + 1000)
end
return -(pttl + 3)
