-- Creates or resets a sale in Redis: a new round with its stock, window and limit; the buyers,
-- idempotency answers and order statuses of the previous round are dropped (a reset is a new
-- sale: idempotency answers are kept per round), and the `closing` mark of close-round.lua goes:
-- the new round is open. The stream stays: events of an older round
-- still in it are settled by the workers as failed (stale round). The sale's epoch grows (it is
-- never reset), and every instance is told: whatever it answered from memory is void.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] buyers  KEYS[4] idem  KEYS[5] status  KEYS[6] orders (stream)
-- KEYS[7] returned (the round's returned units)  KEYS[8] restocks (the round's restock ids)
-- ARGV[1] round  ARGV[2] stock_total  ARGV[3] price_cents  ARGV[4] starts_at_ms (0 = now)
-- ARGV[5] ends_at_ms (0 = open-ended)  ARGV[6] per_user_limit  ARGV[7] worker group name
-- ARGV[8] the sale's notification channel (sharded pub/sub)
-- ARGV[9] payment ('instant' | 'hold')  ARGV[10] hold_seconds (0 for instant)
-- Returns the new epoch (or the current one, when the sale is at this round already).
--
-- Run twice = run once (issue 37 item 3): the Cluster client sends a call again when the
-- connection drops before its reply, and a second run would drop the buyers, idempotency answers
-- and statuses of the reservations made in between. Every preload comes with a round SQL has just
-- started (sql/sales.ts writeSale): a sale already at this round was preloaded by this very call.
if redis.call('HGET', KEYS[1], 'round') == ARGV[1] then
  return tonumber(redis.call('HGET', KEYS[1], 'epoch'))
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[7], KEYS[8])
-- The round is open: close-round.lua's mark goes.
redis.call('HDEL', KEYS[1], 'closing')
redis.call('HSET', KEYS[1], 'round', ARGV[1], 'stock_total', ARGV[2], 'price_cents', ARGV[3],
  'starts_at_ms', ARGV[4], 'ends_at_ms', ARGV[5], 'per_user_limit', ARGV[6],
  'payment', ARGV[9], 'hold_seconds', ARGV[10])
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SET', KEYS[2], ARGV[2])
-- From '0': a group created late must still see every event already in the stream.
-- An existing group answers BUSYGROUP, which is what we want.
redis.pcall('XGROUP', 'CREATE', KEYS[6], ARGV[7], '0', 'MKSTREAM')
redis.call('SPUBLISH', ARGV[8], 'epoch ' .. epoch)
return epoch
