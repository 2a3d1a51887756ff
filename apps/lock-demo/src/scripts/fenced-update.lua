--[[
  fenced-update.lua: the store side of fencing, for the demo's account record.

  The lock alone cannot stop a holder that stalled past its validity (GC pause, SIGSTOP) from
  writing late. The store therefore remembers the highest fencing token that wrote the record
  and refuses any write that does not carry a higher one.

  KEYS[1]: the account, a hash with fields balance, fence, writes
  KEYS[2]: a list of the fences of every accepted write, in acceptance order (for the checker)
  ARGV[1]: the writer's fencing token (integer)
  ARGV[2]: the new balance
  Returns {1, fence} when applied, {0, storedFence} when rejected as stale.
]]
local stored = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence <= stored then
  return {0, stored}
end
redis.call('HSET', KEYS[1], 'balance', ARGV[2], 'fence', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'writes', 1)
redis.call('RPUSH', KEYS[2], ARGV[1])
return {1, fence}
