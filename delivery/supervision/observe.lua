-- observe.lua: records an observer edge.
-- Rule: docs/design.md §6 observers, edges bounded per party.
--
-- observe: make a party an observer of a session.
-- KEYS[1] T:obs:<session>, KEYS[2] T:held:<caller>, KEYS[3] T:watch:<caller>
-- ARGV[1] caller party, ARGV[2] scope, ARGV[3] the session id,
-- ARGV[4] how many edges the caller may hold (T:held + T:watch)
-- Returns 1 when recorded (or its scope updated), 0 when the caller holds
-- ARGV[4] edges already and this one is new (nothing written).

if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and
   redis.call('SCARD', KEYS[2]) + redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
