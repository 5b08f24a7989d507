-- renew.lua: extends a lease its holder still holds.
-- Rule: docs/design.md §14 one routing worker per journal shard.
--
-- KEYS[1] lease; ARGV[1] "owner:epoch", ARGV[2] ttl ms, ARGV[3] "1" to
-- release instead. Returns 1 when held (and renewed or released), else 0.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] == '1' then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
