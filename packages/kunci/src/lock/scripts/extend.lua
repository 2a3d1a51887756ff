--[[
  extend.lua: compare-and-pexpire locks on ONE node, for a batch of requests.

  KEYS: for each request, its n lock keys
  ARGV[1]: number of requests; then per request: token (32 characters), ttl (ms), n
  Returns, per request, 1 if every lock key held the token (a waiter's "!" mark after it is
  fine) and now expires in ttl ms, 0 if any of them had expired or belonged to someone else
  (then none is touched: a partial extension would leave a lock we cannot reason about).
]]
local TOKEN_LENGTH = 32
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local token, ttl, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  a = a + 3
  local ok = 1
  for r = 0, n - 1 do
    local v = redis.call('GET', KEYS[k + r])
    if not v or string.sub(v, 1, TOKEN_LENGTH) ~= token then
      ok = 0
      break
    end
  end
  if ok == 1 then
    for r = 0, n - 1 do redis.call('PEXPIRE', KEYS[k + r], ttl) end
  end
  out[i] = ok
  k = k + n
end
return out
