-- cache-write: store an entry, drop the lease and tell every process the key changed.
--
-- KEYS[1]  value key  {P:K}:v
-- KEYS[2]  lease key  {P:K}:l
-- ARGV[1]  encoded entry (header + payload)
-- ARGV[2]  physical TTL, ms (ttl + grace)
-- ARGV[3]  lease token of the loader writing its result, or '' for an explicit set()
-- ARGV[4]  bus channel
-- ARGV[5]  bus message
--
-- Returns 1 when written, 0 when a loader's lease is no longer its own: a set(), delete() or
-- invalidatePrefix() happened while it loaded (its value may predate that change), or the
-- lease expired. An explicit set() always writes and cancels any load in flight.
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
