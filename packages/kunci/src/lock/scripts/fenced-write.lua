--[[
  fenced-write.lua: the resource side of fencing, for data kept in Redis.

  Applies a write only if its fencing token is above the highest token seen for that record,
  so a holder that stalled past its lock's validity (GC pause, SIGSTOP, slow network) cannot
  overwrite what a later holder wrote.

  KEYS[1]: the record, a hash with fields `value` and `fence`
  ARGV[1]: the writer's fencing token (integer)
  ARGV[2]: the new value
  Returns {1, fence} when applied, {0, storedFence} when rejected as stale.
]]
local stored = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence <= stored then
  return {0, stored}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return {1, fence}
