--[[
  release.lua: compare-and-delete locks on ONE node, for a batch of requests.

  KEYS: for each request, for each of its n resources: lock key, queue key
  ARGV[1]: number of requests; then per request: token (32 characters), n
  Returns, per request, the number of lock keys that held the token and were deleted
  (0 means the lock had expired or belonged to someone else: nothing of theirs is touched).
  A lock marked by a waiter (a "!" after the token) pops the oldest queued waiter and publishes
  on its channel "<lock key>#<id>" (or on the lock key's channel if nobody is queued: anyone may
  try), so exactly that process wakes at once; an unmarked release costs GET + DEL.
]]
local TOKEN_LENGTH = 32
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local token, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local deleted = 0
  for r = 0, n - 1 do
    local lk = KEYS[k + 2 * r]
    local v = redis.call('GET', lk)
    if v and string.sub(v, 1, TOKEN_LENGTH) == token then
      redis.call('DEL', lk)
      if #v > TOKEN_LENGTH then
        local head = redis.call('ZPOPMIN', KEYS[k + 2 * r + 1])[1]
        redis.call('PUBLISH', head and (lk .. '#' .. head) or lk, '')
      end
      deleted = deleted + 1
    end
  end
  out[i] = deleted
  k = k + 2 * n
end
return out
