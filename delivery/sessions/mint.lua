-- mint.lua: creates a session's record for a child token, unless the
-- session exists.
-- Rule: docs/design.md §4 the child-token route.
--
-- KEYS[1] the child's record. ARGV[1] parent id ("" for none), ARGV[2]
-- lineage JSON, ARGV[3] the minting party, ARGV[4] now (ms).
-- Returns 1 when created, 0 when the record already existed (untouched).

if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'parent', ARGV[1], 'lineage', ARGV[2]) end
redis.call('HSET', KEYS[1], 'minter', ARGV[3], 'minted_at', ARGV[4])
return 1
