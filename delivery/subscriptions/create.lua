-- create.lua: stores a subscription and adds it to its sets.
-- Rule: docs/design.md §6 subscriptions, bounded per owner (§10).
--
-- create: store one subscription and index it.
-- KEYS[1] T:subs, KEYS[2] T:ixof, KEYS[3..] every set the id joins
--         (the owner's set first, its index sets, its T:term set if any)
-- ARGV[1] id, ARGV[2] subscription JSON, ARGV[3] JSON array of KEYS[3..],
-- ARGV[4] how many subscriptions the owner may have
-- Returns 1 when created, 0 when the id was taken, -1 when the owner has
-- ARGV[4] already (nothing written for either).

if redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -1 end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
for i = 3, #KEYS do redis.call('SADD', KEYS[i], ARGV[1]) end
return 1
