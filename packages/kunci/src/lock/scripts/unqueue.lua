--[[
  unqueue.lua: take a caller that just won a lock out of the wait queues of ONE node that refused
  it, for a batch of requests.

  A caller that may wait joins the queue of every node where the lock is held, in the same
  script call that finds it held. When its attempt still wins on a majority, the nodes that
  refused it would keep it queued until the queue's TTL: a release there would wake a process
  that no longer waits (instead of the real waiter behind it), and its old place would put it
  ahead of callers that have waited longer. Sent only to nodes that refused a winner: never on
  the uncontended path.

  KEYS: for each request, for each of its n resources: lock key, queue key
  ARGV[1]: number of requests; then per request: waiter id, n
  Returns, per request, the number of queue entries removed. When the queue is left empty, the
  holder's waiter mark ("!" after its 32-character token) is dropped too (the TTL is kept): nobody
  is left to wake, so its release costs GET + DEL again.
]]
local TOKEN_LENGTH = 32
local out = {}
local k = 1
local a = 2
for i = 1, tonumber(ARGV[1]) do
  local waiter, n = ARGV[a], tonumber(ARGV[a + 1])
  a = a + 2
  local removed = 0
  for r = 0, n - 1 do
    local lk, qk = KEYS[k + 2 * r], KEYS[k + 2 * r + 1]
    removed = removed + redis.call('ZREM', qk, waiter)
    if redis.call('EXISTS', qk) == 0 then
      local v = redis.call('GET', lk)
      -- Only a marked kunci token (32 lowercase hex characters and the mark): a foreign value is
      -- never cut.
      if v and #v == TOKEN_LENGTH + 1 and string.sub(v, -1) == '!' then
        local token = string.sub(v, 1, TOKEN_LENGTH)
        if not string.find(token, '[^0-9a-f]') then redis.call('SET', lk, token, 'KEEPTTL') end
      end
    end
  end
  out[i] = removed
  k = k + 2 * n
end
return out
