-- gcra.lua: one request of n events against a workspace's and a token's
-- ingest limits (docs/design.md §4), a GCRA each, on Redis's own clock so every
-- gateway shares one limit. Both are taken or neither: a request refused by
-- one limit costs the other nothing.
--
-- KEYS[1] = the workspace's theoretical arrival time (TAT), µs since the epoch
-- KEYS[2] = the token's TAT (same hash tag: the token's workspace)
-- ARGV[1] = n, the events of the request
-- ARGV[2] = the workspace's emission interval in µs (0: unlimited)
-- ARGV[3] = the workspace's burst, in events
-- ARGV[4] = the token's emission interval in µs (0: unlimited)
-- ARGV[5] = the token's burst, in events
--
-- Returns {allowed, retry_after_us}: allowed 1 (retry 0) when both limits
-- admit the n events, else 0 and how long until they would (-1 when n
-- exceeds a burst: never at once).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])

-- check returns the TAT to store (nil: unlimited) and the wait (0: admitted).
local function check(key, interval, burst)
  if interval <= 0 then return nil, 0 end
  if n > burst then return nil, -1 end
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local new = tat + interval * n
  local allow_at = new - interval * burst
  if allow_at > now then return nil, allow_at - now end
  return new, 0
end

local wnew, wwait = check(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
local tnew, twait = check(KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]))
if wwait < 0 or twait < 0 then return { 0, -1 } end
if wwait > 0 or twait > 0 then return { 0, math.max(wwait, twait) } end
if wnew then redis.call('SET', KEYS[1], string.format('%d', wnew), 'PX', math.ceil((wnew - now) / 1000) + 1) end
if tnew then redis.call('SET', KEYS[2], string.format('%d', tnew), 'PX', math.ceil((tnew - now) / 1000) + 1) end
return { 1, 0 }
