-- A buyer record, `{sale:<id>}:buyers` → user: "<live units>|<last live order>|<slots>", where
-- slot n holds the order that has unit number n ('' when it is free). reserve.lua gives a new
-- order the lowest free slot; return-units.lua frees one. Records written before slots existed
-- ("<count>|<last>") read as `count` slots whose orders are unknown ('?').
--
-- sale-store.ts puts this file in front of the scripts that read the record, so both read it one
-- way (one definition: two copies had already drifted apart on a missing record and a malformed one).

-- count, last, slots of a record (nil: no record, nothing bought). A record of neither form is
-- an error, never "nothing bought": reserve.lua would sell past the user's limit on it (its
-- pcall fails that one checkout, ERROR); return-units.lua decides for itself what to do.
local function parse_buyer(record)
  if not record then return 0, '', {} end
  local slots = {}
  local c, last, rest = string.match(record, '^(%d+)|([^|]*)|(.*)$')
  if c then
    for slot in string.gmatch(rest .. ',', '([^,]*),') do slots[#slots + 1] = slot end
  else
    c, last = string.match(record, '^(%d+)|(.*)$')
    if not c then error('malformed buyer record: ' .. record) end
    for n = 1, tonumber(c) do slots[n] = '?' end
  end
  return tonumber(c), last, slots
end
