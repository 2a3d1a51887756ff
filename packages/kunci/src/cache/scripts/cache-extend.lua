-- cache-extend: renew the lease while the loader is still running.
--
-- KEYS[1]  lease key  {P:K}:l
-- ARGV[1]  lease token
-- ARGV[2]  lease TTL, ms
--
-- Returns 1 when renewed, 0 when the lease is no longer ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
