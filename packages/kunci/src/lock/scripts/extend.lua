--[[
  extend.lua: compare-and-pexpire locks on ONE node, for a batch of requests.

  KEYS: for each request, for each of its n resources: lock key, fence key
  ARGV[1]: number of requests; then per request: token (32 characters), ttl (ms), fence (the
  lock's fencing token), n
  Returns, per request, 1 if every lock key now holds the token and expires in ttl ms, 0 if any
  of them belonged to someone else, or is missing where a later holder was granted (then none is
  touched: a partial extension would leave a lock we cannot reason about).

  A lock key that is missing is set again (token, PX ttl) when this node granted nobody after
  us: its fence key is not above our fence. So a lock that landed on exactly a quorum (the other
  nodes were cut off when it was granted) or expired early on one node (a clock step) is back on
  every reachable node after one extension, and one more node losing it cannot let a second
  holder in. The caller extends only a lock that is still valid on a quorum, so nobody else can
  hold it meanwhile; the fence key is raised to our fence where it was below it.
]]
local TOKEN_LENGTH = 32
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local token, ttl, fence, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  a = a + 4
  local ok = 1
  local missing = nil
  for r = 0, n - 1 do
    local lk = KEYS[k + 2 * r]
    local v = redis.call('GET', lk)
    if not v then
      local stored = redis.call('GET', KEYS[k + 2 * r + 1])
      if stored and tonumber(stored) > tonumber(fence) then
        ok = 0
        break
      end
      missing = missing or {}
      missing[r] = stored or false
    elseif string.sub(v, 1, TOKEN_LENGTH) ~= token then
      ok = 0
      break
    end
  end
  if ok == 1 then
    for r = 0, n - 1 do
      local lk = KEYS[k + 2 * r]
      if missing and missing[r] ~= nil then
        redis.call('SET', lk, token, 'PX', ttl)
        if missing[r] ~= fence then redis.call('SET', KEYS[k + 2 * r + 1], fence) end
      else
        redis.call('PEXPIRE', lk, ttl)
      end
    end
  end
  out[i] = ok
  k = k + 2 * n
end
return out
