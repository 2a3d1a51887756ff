-- Adds a restock's units to a sale's current round (buyers, idempotency answers and order
-- statuses stay): the stock and stock_total grow, the epoch grows in the same script, and every
-- instance is told on the sale's channel, so none keeps answering "sold out" from memory.
--
-- Once per restock id (issue 37 items 3 and 4): SQL records the restock first (sql/restocks.ts),
-- then this runs, possibly more than once (the Cluster client resends a call whose connection
-- closed; a worker finishes a restock left pending). `restocks` remembers the ids applied, in the
-- same slot and the same atomic script as the stock, so a failover keeps both or neither.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] restocks (hash: restock id → units; dropped with the round)
-- ARGV[1] units to add (> 0)  ARGV[2] the round it is meant for  ARGV[3] the sale's channel
-- ARGV[4] the restock id
-- Returns { epoch, stock, 1 = applied now | 0 = applied before }, or { -1, 0, 0 } if the sale is
-- gone or in another round.
local round = redis.call('HGET', KEYS[1], 'round')
if round ~= ARGV[2] then return { -1, 0, 0 } end
if redis.call('HSETNX', KEYS[3], ARGV[4], ARGV[1]) == 0 then
  local epoch = tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')
  return { epoch, tonumber(redis.call('GET', KEYS[2]) or '0'), 0 }
end
redis.call('HINCRBY', KEYS[1], 'stock_total', ARGV[1])
local stock = redis.call('INCRBY', KEYS[2], ARGV[1])
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SPUBLISH', ARGV[3], 'epoch ' .. epoch)
return { epoch, stock, 1 }
