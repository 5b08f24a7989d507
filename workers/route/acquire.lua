-- acquire.lua: takes a free lease.
-- Rule: docs/design.md §14 one routing worker per journal shard, under a lease with a fencing epoch.
--
-- KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] owner, ARGV[2] ttl ms.
-- Returns the new epoch, or 0 when the lease is held.

if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. epoch, 'PX', ARGV[2])
return epoch
