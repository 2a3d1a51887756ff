-- cache-fetch: read an entry and, unless it is fresh, try to take the lease to load it.
-- One call, one slot: the read and the check-and-lease are atomic, so exactly one caller in
-- the whole fleet is told to run the loader per refresh.
--
-- KEYS[1]  value key  {P:K}:v
-- KEYS[2]  lease key  {P:K}:l
-- ARGV[1]  now, ms since the epoch (caller's clock, as used for expiresAt)
-- ARGV[2]  lease token (unique per attempt)
-- ARGV[3]  lease TTL, ms
-- ARGV[4]  '' for a read that needs a value; for an early refresh, the expiresAt the caller
--          saw: if the entry has been rewritten since, there is nothing to refresh
--
-- Returns {status, raw}
--   {0, raw}        FRESH   raw is fresh (or already rewritten, for an early refresh)
--   {1, raw|false}  LEASED  the caller holds the lease and must load; raw is the stale entry
--   {2, raw|false}  HELD    another caller holds the lease; raw is the stale entry
local raw = redis.call('GET', KEYS[1])
local expires = false
if raw then
  expires = string.match(raw, '^[vn](%d+):')
  if not expires then raw = false end
end
if raw then
  if ARGV[4] == '' then
    if tonumber(expires) > tonumber(ARGV[1]) then return {0, raw} end
  elseif expires ~= ARGV[4] then
    return {0, raw}
  end
end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then
  return {1, raw}
end
return {2, raw}
