-- Sets up, resets or removes a sale's waiting room: every place, admission and draw entry of
-- the previous room is dropped (a sale reset resets its room), and with ARGV[1] = '1' the new
-- settings are written with an empty token bucket.
--
-- KEYS[1] room (hash)  KEYS[2] waiting (zset)  KEYS[3] seen (zset)  KEYS[4] admitted (zset)
-- KEYS[5] users (hash) KEYS[6] draw (zset)
-- ARGV[1] '1' = a room, '0' = none   ARGV[2] generation (16 hex digits)
-- ARGV[3] admit_per_second  ARGV[4] max_admitted  ARGV[5] admission_ms  ARGV[6] stock_factor
-- ARGV[7] drop_after_ms     ARGV[8] lottery secret (64 hex digits)  ARGV[9] its SHA-256 (hex)
--
-- Returns the room's creation time (ms, server TIME), or 0 when there is no room.
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if ARGV[1] ~= '1' then return 0 end
local t = redis.call('TIME')
local now = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'admit_per_second', ARGV[3], 'max_admitted', ARGV[4],
  'admission_ms', ARGV[5], 'stock_factor', ARGV[6], 'drop_after_ms', ARGV[7], 'secret', ARGV[8],
  'commitment', ARGV[9], 'created_ms', now, 'tokens', '0', 'tokens_ms', now, 'last_key', '0',
  'sweep_ms', '0', 'sweep_offset', '0', 'admitted_total', '0', 'dropped_total', '0',
  'expired_total', '0')
return tonumber(now)
