-- set_quiet.lua: puts a quiet record.
-- Rule: docs/design.md §7 quiet records, bounded per workspace (§10).
--
-- KEYS[1] the workspace's quiet hash; ARGV[1] scope, ARGV[2] record JSON,
-- ARGV[3] MaxQuietRecords. Returns 1 when written, 0 when the scope is
-- new and the hash holds ARGV[3] records already (nothing written).

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
