-- Closes a sale's round before a reset moves SQL to the next one (sale/sale-admin.ts putSale):
-- `closing` in the sale's meta names the round about to start, and until preload.lua starts it
-- (and clears the mark) reserve.lua answers SALE_RESETTING (503, retry) instead of selling. The
-- admin confirms the mark on a replica before SQL is touched, so a failover that drops the
-- preload (or an admin that dies between SQL's commit and the preload) leaves a master that
-- refuses, never one that sells the round SQL has closed: such 200s would all end `stale_round`
-- (issue 37 item 8). The epoch grows and every instance is told: nothing is answered from memory
-- for a round being closed.
--
-- KEYS[1] meta  ARGV[1] the round about to start  ARGV[2] the sale's channel (sharded pub/sub)
-- Returns the new epoch; 0 when the sale is at that round already (this reset's preload ran: a
-- repeated call); -1 when Redis holds no sale (nothing to close).
-- Run twice = run once but for the epoch, which only grows.
local round = redis.call('HGET', KEYS[1], 'round')
if not round then return -1 end
if round == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'closing', ARGV[1])
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SPUBLISH', ARGV[2], 'epoch ' .. epoch)
return epoch
