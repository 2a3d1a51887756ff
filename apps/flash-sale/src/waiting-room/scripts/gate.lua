-- The checkout's ticket check, read only: is this user admitted to this sale's room now?
-- The signature, sale and user of the ticket were checked by the service before this runs.
--
-- KEYS[1] room (hash)  KEYS[2] users (hash)  KEYS[3] admitted (zset)  KEYS[4] waiting (zset)
-- KEYS[5] sale stock (int, read)  KEYS[6] sale buyers (hash, read)
-- ARGV[1] user id   ARGV[2] the ticket's generation, '' without a valid ticket
--
-- Returns { code [, position] }: OFF (no room: no ticket needed), NO_TICKET, STALE (a ticket of
-- an earlier room), OK (admitted and not lapsed, or bought already: the reservation answers,
-- with the replay of an Idempotency-Key or ALREADY_PURCHASED and the order id),
-- EXPIRED (the admission lapsed), SOLD_OUT (not admitted, no unit left), NOT_ADMITTED with the
-- position in line (-1 when the place is gone: polling the ticket restores it).
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen then return { 'OFF' } end
if ARGV[2] == '' then return { 'NO_TICKET' } end
if ARGV[2] ~= gen then return { 'STALE' } end
local v = redis.call('HGET', KEYS[2], ARGV[1])
local state = v and string.sub(v, 1, 1) or ''
if state == 'b' or (state ~= '' and redis.call('HEXISTS', KEYS[6], ARGV[1]) == 1) then return { 'OK' } end
if state == 'a' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local till = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]) or '0')
  if till > now then return { 'OK' } end
  return { 'EXPIRED' }
end
if state == 'x' then return { 'EXPIRED' } end
if tonumber(redis.call('GET', KEYS[5]) or '0') <= 0 then return { 'SOLD_OUT' } end
local rank = redis.call('ZRANK', KEYS[4], ARGV[1])
return { 'NOT_ADMITTED', rank and rank + 1 or -1 }
