--[[
  release.lua: compare-and-delete locks on ONE node, for a batch of requests.

  KEYS: for each request, its n lock keys
  ARGV[1]: number of requests; then per request: token, n
  Returns, per request, the number of lock keys that held the token and were deleted
  (0 means the lock had expired or belonged to someone else: nothing of theirs is touched).
  Each deletion publishes on the lock key's channel to wake waiters in other processes.
]]
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local token, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local deleted = 0
  for r = 0, n - 1 do
    local lk = KEYS[k + r]
    if redis.call('GET', lk) == token then
      redis.call('DEL', lk)
      redis.call('PUBLISH', lk, '')
      deleted = deleted + 1
    end
  end
  out[i] = deleted
  k = k + n
end
return out
