-- acquire.lua: takes a free lease, or one held under the claimant's own
-- identity (a dead predecessor's: an identity is held by one live process
-- at a time, identity.go), with a new epoch that fences the old holder.
-- Rule: docs/design.md §14 one routing worker per journal shard, under a lease with a fencing epoch.
--
-- KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] owner, ARGV[2] ttl ms.
-- Returns the new epoch, or 0 when the lease is held by another owner.

local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then return 0 end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. epoch, 'PX', ARGV[2])
return epoch
