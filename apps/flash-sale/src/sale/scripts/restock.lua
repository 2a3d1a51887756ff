-- Adds units to a sale's current round (buyers, idempotency answers and order statuses stay):
-- the stock and stock_total grow, the epoch grows in the same script, and every instance is told
-- on the sale's channel, so none keeps answering "sold out" from memory.
--
-- KEYS[1] meta  KEYS[2] stock
-- ARGV[1] units to add (> 0)  ARGV[2] the round it is meant for  ARGV[3] the sale's channel
-- Returns { epoch, stock } or { -1, 0 } if the sale is gone or in another round.
local round = redis.call('HGET', KEYS[1], 'round')
if round ~= ARGV[2] then return { -1, 0 } end
redis.call('HINCRBY', KEYS[1], 'stock_total', ARGV[1])
local stock = redis.call('INCRBY', KEYS[2], ARGV[1])
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SPUBLISH', ARGV[3], 'epoch ' .. epoch)
return { epoch, stock }
