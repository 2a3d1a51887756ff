-- wrk's request generator for bench/checkout/wrk.ts: POST /v1/checkout of product 9921, as the
-- k6 scenario sends it (a random user below 100,000), in one of four shapes given as wrk's script
-- arguments (`wrk … -s wrk-checkout.lua <url> -- <shape> <prefix>`):
--   keyless  no Idempotency-Key (the k6 scenario);
--   keys     a fresh Idempotency-Key on every request (a new click each time);
--   repeats  only repeats of a pool of 1,000 keys, each with its own user (a retrying crowd);
--   mix      a third keyless, a third repeats of the pool, a third new keys of new users;
--   buyers   a new user on every request, no Idempotency-Key: reservations while the stock lasts
--            (bench/checkout/floor.ts).
-- `prefix` makes this run's keys its own (the service keeps a key's first answer).
local shape = "keyless"
local prefix = "k"
local poolPrefix = "k"
local counter = 0
local POOL = 1000

function init(args)
  shape = args[1] or shape
  prefix = args[2] or prefix
  poolPrefix = prefix
  -- Threads share nothing: seed each apart, and number its fresh keys apart too.
  local id = tostring({}):match("0x(%x+)") or "0"
  math.randomseed(os.time() + tonumber(id:sub(-6), 16))
  prefix = prefix .. "-" .. id:sub(-6)
end

local headers = { ["Content-Type"] = "application/json" }
local keyed = { ["Content-Type"] = "application/json" }

local function body(user)
  return '{"product_id":9921,"user_id":' .. user .. "}"
end

local function fresh()
  counter = counter + 1
  keyed["Idempotency-Key"] = prefix .. "-" .. counter
  return wrk.format("POST", "/v1/checkout", keyed, body(math.random(0, 99999)))
end

local function repeated()
  -- The pool's key i belongs to user 100000 + i (the same for every thread), so every thread
  -- repeats the same 1,000 keys.
  local i = math.random(0, POOL - 1)
  keyed["Idempotency-Key"] = poolPrefix .. "-pool-" .. i
  return wrk.format("POST", "/v1/checkout", keyed, body(100000 + i))
end

local function buyer()
  counter = counter + 1
  return wrk.format("POST", "/v1/checkout", headers,
    '{"product_id":9921,"user_id":"' .. prefix .. "-" .. counter .. '"}')
end

local function keyless()
  return wrk.format("POST", "/v1/checkout", headers, body(math.random(0, 99999)))
end

function request()
  if shape == "keys" then return fresh() end
  if shape == "repeats" then return repeated() end
  if shape == "buyers" then return buyer() end
  if shape == "mix" then
    local r = math.random(3)
    if r == 1 then return keyless() end
    if r == 2 then return repeated() end
    return fresh()
  end
  return keyless()
end
