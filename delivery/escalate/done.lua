-- done.lua: ends the check of one entry.
-- Rule: docs/design.md §8 escalation: the end of a check.
--
-- KEYS[1] = :x, KEYS[2] = :xc, KEYS[3] = :xd of the recipient
-- ARGV[1] = coalesce key, ARGV[2] = the due ms it was checked for
-- Removes the claim; removes the key from :x and :xd only if it is still
-- due at ARGV[2] (a raise or a dead letter since has re-armed it: that
-- check is still to come). Returns 1 when the key left :x, else 0.

redis.call('HDEL', KEYS[2], ARGV[1])
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
return 1
