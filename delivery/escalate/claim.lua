-- claim.lua: records a check's decision once.
-- Rule: docs/design.md §8 escalation: one decision per due entry.
--
-- KEYS[1] = :x, KEYS[2] = :xc of the recipient
-- ARGV[1] = coalesce key, ARGV[2] = the due ms decided for, ARGV[3] = Claim JSON
-- Returns the claim in force — an earlier one, or ARGV[3] now recorded —
-- or "" (nothing recorded) when the key is no longer due at ARGV[2]: acked,
-- raised or re-armed meanwhile; its next check decides.

local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then return cur end
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) ~= tonumber(ARGV[2]) then return '' end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
return ARGV[3]
