-- record.lua: records an attempt's outcome and opens or closes the
-- breaker.
-- Rule: docs/design.md §8 outbound pushes: the circuit breaker.
--
-- KEYS[1] breaker hash, KEYS[2] window zset; ARGV[1] now (ms), ARGV[2]
-- "1" success / "0" failure, ARGV[3] unique member, ARGV[4] failures in a
-- row, ARGV[5] ratio, ARGV[6] min attempts, ARGV[7] window (ms), ARGV[8]
-- open period (ms). Returns the open_until it left (0 = closed).

local now = tonumber(ARGV[1])
local win = tonumber(ARGV[7])
local ok = ARGV[2] == '1'
redis.call('ZADD', KEYS[2], now, (ok and 's:' or 'f:') .. ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - win)
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -1001)
redis.call('PEXPIRE', KEYS[2], win)
local open = tonumber(redis.call('HGET', KEYS[1], 'open_until') or '0')
if ok then
  if open > 0 then redis.call('DEL', KEYS[2]) end -- recovered: forget the failures that opened it
  redis.call('DEL', KEYS[1])
  return 0
end
local fails = redis.call('HINCRBY', KEYS[1], 'fails', 1)
redis.call('PEXPIRE', KEYS[1], win + tonumber(ARGV[8]))
if open > now then return open end -- already open: an attempt that started before
local trip = open > 0 or fails >= tonumber(ARGV[4]) -- a failed probe, or too many in a row
if not trip then
  local all = redis.call('ZRANGE', KEYS[2], 0, -1)
  if #all >= tonumber(ARGV[6]) then
    local failed = 0
    for _, m in ipairs(all) do if string.sub(m, 1, 1) == 'f' then failed = failed + 1 end end
    trip = failed >= tonumber(ARGV[5]) * #all
  end
end
if not trip then return 0 end
open = now + tonumber(ARGV[8])
redis.call('HSET', KEYS[1], 'open_until', open, 'probe_until', 0)
return open
