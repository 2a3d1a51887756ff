--[[
  acquire.lua: grant (or hand over) locks on ONE node, for a batch of independent requests.

  Batched so that concurrent acquisitions issued in the same tick cost one round trip and one
  script call per node instead of one each.

  KEYS: for each request, for each of its n resources, three keys in the resource's hash slot:
          lock key  (string: holder token, PX ttl)
          fence key (string: highest fencing token granted here; persistent)
          wait key  (string "1", PX ttl: some client outside the holder's process is waiting)
  ARGV[1]: number of requests
  then per request, 6 values:
          token     random holder token (never empty)
          ttl       lock TTL in ms
          fence     proposed fencing token (integer)
          n         number of resources
          prev      token of the current holder to hand over from, or "" for a plain acquire
          yield     "1": if prev is set and someone outside waits, release prev instead of
                    handing over (fairness across processes)

  Returns, per request, a table {status, a, b, prevOwned}:
          {1, fence, 0, p}   granted with the proposed fence (fence keys now hold it)
          {0, pttl, f, p}    held by another token; pttl = longest remaining TTL, f = highest fence
          {2, f, 0, p}       fenced: the proposal was not above f, the highest fence stored here
          {3, 0, 0, p}       yielded: prev released, the caller should wait like everyone else
        p = number of resources on which prev held the lock (for the old holder's release report)

  All-or-nothing per request: nothing is written unless every resource can be granted.
  A hand-over or yield that releases prev publishes on the lock key's channel so waiters in
  other processes wake up.
]]
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local token, ttl, fence, n, prev, yield =
    ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5]
  a = a + 6

  local held, pttl, maxFence, prevOwned, waiting = false, 0, 0, 0, false
  for r = 0, n - 1 do
    local lk = KEYS[k + 3 * r]
    local cur = redis.call('GET', lk)
    if cur then
      if prev ~= '' and cur == prev then
        prevOwned = prevOwned + 1
      else
        held = true
        local t = redis.call('PTTL', lk)
        if t > pttl then pttl = t end
      end
    end
    local f = tonumber(redis.call('GET', KEYS[k + 3 * r + 1]) or '0')
    if f > maxFence then maxFence = f end
    if yield == '1' and redis.call('EXISTS', KEYS[k + 3 * r + 2]) == 1 then waiting = true end
  end

  local function releasePrev()
    for r = 0, n - 1 do
      local lk = KEYS[k + 3 * r]
      if prev ~= '' and redis.call('GET', lk) == prev then
        redis.call('DEL', lk)
        redis.call('PUBLISH', lk, '')
      end
    end
  end

  if prevOwned > 0 and waiting then
    releasePrev()
    -- Mark ourselves as waiting too, so the other process yields back after its own run.
    for r = 0, n - 1 do redis.call('SET', KEYS[k + 3 * r + 2], '1', 'PX', ttl) end
    out[i] = {3, 0, 0, prevOwned}
  elseif held then
    releasePrev()
    for r = 0, n - 1 do redis.call('SET', KEYS[k + 3 * r + 2], '1', 'PX', ttl) end
    out[i] = {0, pttl, maxFence, prevOwned}
  elseif fence <= maxFence then
    releasePrev()
    out[i] = {2, maxFence, 0, prevOwned}
  else
    for r = 0, n - 1 do
      redis.call('SET', KEYS[k + 3 * r], token, 'PX', ttl)
      redis.call('SET', KEYS[k + 3 * r + 1], ARGV[a - 4])
    end
    out[i] = {1, fence, 0, prevOwned}
  end
  k = k + 3 * n
end
return out
