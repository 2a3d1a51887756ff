--[[
  release-one.lua: compare-and-delete ONE lock key, for a request alone in its tick (release.lua
  serves batches and several resources; same decisions, without the loop).

  KEYS[1] lock key, KEYS[2] queue key; ARGV[1] token (32 characters)
  Returns 1 if the key held the token and was deleted, 0 otherwise (expired or someone
  else's: nothing of theirs is touched). A key marked by a waiter ("!" after the token) wakes the
  oldest queued waiter on its channel "<lock key>#<id>", or anyone on the lock key's channel.
]]
local TOKEN_LENGTH = 32
local lk = KEYS[1]
local v = redis.call('GET', lk)
if v == ARGV[1] then
  redis.call('DEL', lk)
  return 1
end
if v and #v > TOKEN_LENGTH and string.sub(v, 1, TOKEN_LENGTH) == ARGV[1] then
  redis.call('DEL', lk)
  local head = redis.call('ZPOPMIN', KEYS[2])[1]
  redis.call('PUBLISH', head and (lk .. '#' .. head) or lk, '')
  return 1
end
return 0
