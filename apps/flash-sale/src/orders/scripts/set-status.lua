-- Marks an order confirmed or failed once the AMQP consumer has persisted it in SQL. Only an order
-- still in the hash is updated: a sale reset drops the statuses of its old round (GET /v1/orders
-- then answers from SQL), and a late message must not bring a dropped order back.
-- Unlike settle.lua there is no XACK: the relay already acknowledged the stream entry when the
-- broker confirmed the message.
--
-- KEYS[1] status (hash)
-- ARGV[1] order id  ARGV[2] the order's status in SQL; 'reserved' is not written (see settle.lua)
-- Returns 1 if the order was updated, 0 if it is no longer there.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then return 0 end
if ARGV[2] == 'reserved' then return 1 end
local rest = string.match(current, '^[^|]*(|.*)$') or ''
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. rest)
return 1
