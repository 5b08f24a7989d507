-- get.lua: reads one entry with the seq it has now.
-- Rule: docs/design.md §7 reading one inbox entry.
--
-- KEYS[1..2] = :e, :u of the recipient; ARGV[1] = the coalesce key.
-- Returns {seq, entry}, or {} when the key has no unacked entry.

local v = redis.call('HGET', KEYS[1], ARGV[1])
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not v or not s then return {} end
return { tonumber(s), v }
