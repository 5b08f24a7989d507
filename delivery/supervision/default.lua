-- default.lua: makes a parent its child's controller unless one is set.
-- Rule: docs/design.md §6 the spawner is a new session's default controller.
--
-- default controller: set the spawner as controller of a new session.
-- KEYS[1] T:ctl:<child>, KEYS[2] T:held:<parent's party>
-- ARGV[1] the parent's party (session:<parent>), ARGV[2] the child id
-- Returns 1 when set (scope subtree, epoch+1), 0 when the child already
-- had a controller (nothing written).

local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= '' then return 0 end
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'scope', 'subtree')
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SADD', KEYS[2], ARGV[2])
return 1
