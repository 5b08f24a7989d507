-- release.lua: lets the holder go of a lease.
-- Rule: docs/design.md §6 controller leases.
--
-- release: drop a controller lease if the caller holds it.
-- KEYS[1] T:ctl:<session>, KEYS[2] T:held:<caller>
-- ARGV[1] caller party, ARGV[2] the session id
-- Returns 1 when released, 0 when the caller does not hold it. The epoch
-- stays, so the next holder's epoch is higher still.

if redis.call('HGET', KEYS[1], 'holder') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'holder', 'scope')
redis.call('SREM', KEYS[2], ARGV[2])
return 1
