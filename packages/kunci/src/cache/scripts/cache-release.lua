-- cache-release: give the lease back without a value (the loader failed or found nothing to
-- cache) and wake the waiters so one of them can try.
--
-- KEYS[1]  lease key  {P:K}:l
-- ARGV[1]  lease token
-- ARGV[2]  bus channel
-- ARGV[3]  bus message
--
-- Returns 1 when released, 0 when the lease was not ours any more.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
