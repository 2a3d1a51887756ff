-- Moves an order event that keeps failing to the sale's dead-letter stream, with the reason,
-- and acknowledges it in the same step, so it is never dropped silently nor handled twice.
--
-- KEYS[1] orders (stream)  KEYS[2] dead (stream)  KEYS[3] status (hash)
-- KEYS[4] attempts (hash, begin-attempts.lua: the entry's count is dropped)
-- ARGV[1] group  ARGV[2] entry id  ARGV[3] order id  ARGV[4] reason  ARGV[5] deliveries
-- ARGV[6..] the entry's field/value pairs
-- Returns the dead-letter entry id.
local fields = { 'entry_id', ARGV[2], 'reason', ARGV[4], 'deliveries', ARGV[5] }
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
local current = redis.call('HGET', KEYS[3], ARGV[3])
if current then
  local rest = string.match(current, '^[^|]*(|.*)$') or ''
  redis.call('HSET', KEYS[3], ARGV[3], 'failed' .. rest)
end
return id
