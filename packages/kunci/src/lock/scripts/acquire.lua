--[[
  acquire.lua: grant (or hand over) locks on ONE node, for a batch of independent requests.

  Batched so that acquisitions issued in the same tick cost one round trip and one script call
  per node. Written for few Redis calls and no per-call allocations on the common path: an
  uncontended single-resource grant is SET NX + SET GET.

  KEYS: for each request, for each of its n resources, three keys in the resource's hash slot:
          lock key  (string: holder token, PX ttl; "!" appended while someone else waits)
          fence key (string: highest fencing token granted here for the resource; persistent)
          queue key (sorted set: waiting managers by the time they started waiting; with a TTL)
  ARGV[1]: number of requests
  then per request, 6 values (few arguments: each one costs the server and the client):
          token     random holder token, 32 characters
          ttl       lock TTL in ms
          fence     proposed fencing token (integer)
          n         number of resources
          handover  "" for a plain acquire, or "<prev>|<yield>": hand over from the current
                    holder's token prev; with yield "1", if someone outside the holder's process
                    waits (the lock is marked), release prev instead (fairness across processes)
          waiter    "" if the caller will not retry (then it never queues), or
                    "<id>|<since>|<queued>": its queue name, when it started waiting (ms, its
                    place in the queue), and "1" if an earlier attempt queued it (a grant then
                    removes it)

  Returns a flat array, three integers per request (flat: nested tables cost more to return):
          1, fence, p   granted with the proposed fence (the fence keys now hold it)
          0, pttl, p    held by another token; pttl = its remaining TTL in ms
          2, f, p       fenced: the proposal was not above f, the highest fence stored here
          3, 0, p       yielded: prev released, the caller should wait like everyone else
        p = number of resources on which prev held the lock (for the old holder's release report)

  All-or-nothing per request: whatever was written is undone unless every resource is granted.
  A waiter that finds the lock held marks it (SETRANGE keeps the TTL; only a kunci token, never
  a value another client wrote) and joins the queue; a
  release of a marked lock pops the oldest waiter and publishes on its channel ("<lock key>#<id>"),
  so one waiter tries instead of every waiting process (no thundering herd). Newcomers may still
  take a free lock first; the woken waiter then keeps its place (ZADD NX with its old score).
]]
local TOKEN_LENGTH = 32
local MARK = '!'
local out = {}
local k, a, o = 1, 2, 0
-- An unmarked kunci token (32 lowercase hex characters). Only such a value is ever marked: a
-- value another client wrote under the lock's name is never changed.
local function isToken(v)
  return v and #v == TOKEN_LENGTH and not string.find(v, '[^0-9a-f]')
end
-- Wakes the oldest queued waiter of a released lock on its own channel (or everyone, on the
-- lock key's channel, if the queue is empty).
local function wake(lk, qk)
  local head = redis.call('ZPOPMIN', qk)[1]
  redis.call('PUBLISH', head and (lk .. '#' .. head) or lk, '')
end

for _ = 1, tonumber(ARGV[1]) do
  local token, ttl, fenceArg = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local n, handover, queueing = tonumber(ARGV[a + 3]), ARGV[a + 4], ARGV[a + 5]
  local fence = tonumber(fenceArg)
  a = a + 6
  local prev, yield = '', '0'
  if handover ~= '' then prev, yield = string.match(handover, '^(.*)|(.)$') end
  local waiter, since, queued = '', '0', '0'
  if queueing ~= '' then waiter, since, queued = string.match(queueing, '^(.*)|(.*)|(.)$') end
  local status, x, p = 1, fence, 0

  if prev == '' and n == 1 then
    -- The common case, straight-line.
    local lk, fk, qk = KEYS[k], KEYS[k + 1], KEYS[k + 2]
    if redis.call('SET', lk, token, 'NX', 'PX', ttl) then
      local old = redis.call('SET', fk, fenceArg, 'GET')
      if old and tonumber(old) >= fence then
        redis.call('SET', fk, old)
        redis.call('DEL', lk)
        status, x = 2, tonumber(old)
      else
        -- A queued caller that got the lock (it was woken in turn) marks it if others still
        -- wait, so its release wakes the next one. (A newcomer that got in first is marked by
        -- the woken waiter's failed attempt instead: no extra call on the uncontended path.)
        if queued == '1' then
          redis.call('ZREM', qk, waiter)
          if redis.call('EXISTS', qk) == 1 then redis.call('SETRANGE', lk, TOKEN_LENGTH, MARK) end
        end
      end
    else
      status, x = 0, redis.call('PTTL', lk)
      -- Only a caller that will wait marks the lock and queues: a release then wakes someone.
      if waiter ~= '' then
        if isToken(redis.call('GET', lk)) then redis.call('SETRANGE', lk, TOKEN_LENGTH, MARK) end
        redis.call('ZADD', qk, 'NX', since, waiter)
        redis.call('PEXPIRE', qk, 2 * ttl + 1000)
      end
    end
  else
    -- Several resources, or a hand-over: read every lock first.
    local cur, held, waiting = {}, false, false
    x = -1
    for r = 0, n - 1 do
      local lk = KEYS[k + 3 * r]
      local v = redis.call('GET', lk)
      cur[r] = v
      if v and prev ~= '' and string.sub(v, 1, TOKEN_LENGTH) == prev then
        p = p + 1
        if #v > TOKEN_LENGTH then waiting = true end
      elseif v then
        held = true
        local t = redis.call('PTTL', lk)
        if t > x then x = t end
        if waiter ~= '' and isToken(v) then redis.call('SETRANGE', lk, TOKEN_LENGTH, MARK) end
        if waiter ~= '' then
          redis.call('ZADD', KEYS[k + 3 * r + 2], 'NX', since, waiter)
          redis.call('PEXPIRE', KEYS[k + 3 * r + 2], 2 * ttl + 1000)
        end
      end
    end
    if held or (waiting and yield == '1') then
      -- Not ours to take: give prev up where it is ours, waking the other processes' waiters.
      for r = 0, n - 1 do
        local v = cur[r]
        if v and prev ~= '' and string.sub(v, 1, TOKEN_LENGTH) == prev then
          redis.call('DEL', KEYS[k + 3 * r])
          if #v > TOKEN_LENGTH then wake(KEYS[k + 3 * r], KEYS[k + 3 * r + 2]) end
        end
      end
      if held then status = 0 else status, x = 3, 0 end
    else
      for r = 0, n - 1 do
        local qk = KEYS[k + 3 * r + 2]
        if queued == '1' then redis.call('ZREM', qk, waiter) end
        -- Mark the lock while others wait, so that the new holder's release wakes the next one.
        -- A hand-over keeps prev's mark (waiters mark the lock they fail on); a queued caller
        -- checks the queue.
        local v = cur[r]
        local marked = (v and #v > TOKEN_LENGTH) or (queued == '1' and redis.call('EXISTS', qk) == 1)
        redis.call('SET', KEYS[k + 3 * r], marked and (token .. MARK) or token, 'PX', ttl)
      end
      local old, highest = {}, 0
      for r = 0, n - 1 do
        local v = redis.call('SET', KEYS[k + 3 * r + 1], fenceArg, 'GET')
        old[r] = v
        local f = tonumber(v or '0')
        if f > highest then highest = f end
      end
      x = fence
      if highest >= fence then
        -- A stale proposal: undo every write of this request.
        for r = 0, n - 1 do
          local fk = KEYS[k + 3 * r + 1]
          if old[r] then redis.call('SET', fk, old[r]) else redis.call('DEL', fk) end
          redis.call('DEL', KEYS[k + 3 * r])
          if waiting then wake(KEYS[k + 3 * r], KEYS[k + 3 * r + 2]) end
        end
        status, x = 2, highest
      end
    end
  end
  out[o + 1], out[o + 2], out[o + 3] = status, x, p
  o = o + 3
  k = k + 3 * n
end
return out
