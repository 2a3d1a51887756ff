-- cache-delete: remove an entry and its lease (so a load in flight will not write back a value
-- read before the delete) and tell every process the key changed.
--
-- KEYS[1]  value key  {P:K}:v
-- KEYS[2]  lease key  {P:K}:l
-- ARGV[1]  bus channel
-- ARGV[2]  bus message
--
-- Returns 1 when a value was deleted, 0 when there was none.
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return n
