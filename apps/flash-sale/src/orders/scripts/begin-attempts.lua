-- Counts one more persisting attempt for each order event of a batch, just before the batch goes
-- to the sink (issue 37 item 2). The attempt's end takes the count away again, whatever the end:
-- persisted (settle.lua), failed by the sink (counted by the worker in memory), or an outage of
-- the sink's store (not a failure). So the count left on an event is the number of workers that
-- died while persisting it: what marks a poison event. Reads of pending events while they wait
-- for a replica, outages and claims count nothing, unlike Redis's own delivery counter (every
-- XREADGROUP of the pending history and every XCLAIM raises that one).
--
-- KEYS[1] attempts (hash: entry id → attempts begun and not ended)
-- ARGV entry ids
-- Returns the number of ids counted.
for i = 1, #ARGV do redis.call('HINCRBY', KEYS[1], ARGV[i], 1) end
return #ARGV
