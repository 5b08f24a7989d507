-- set_parent.lua: records a parent once.
-- Rule: docs/design.md §4 sessions; §2 lineage.
--
-- KEYS[1] the child's record; ARGV[1] parent id, ARGV[2] lineage JSON.
-- Returns 1 when recorded, 0 when the child already had a parent.

if redis.call('HSETNX', KEYS[1], 'parent', ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'lineage', ARGV[2])
return 1
