-- dead.lua: marks entries whose push was dead-lettered to escalate at
-- once.
-- Rule: docs/design.md §8 a dead-lettered push escalates at once.
--
-- KEYS[1] = :x, KEYS[2] = :xd of the recipient
-- ARGV[1] = now (ms), ARGV[2..] = coalesce keys
-- Returns how many keys it marked. An entry acked since is dropped by its
-- check; one that may not escalate (never armed) too.

for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i])
  redis.call('SADD', KEYS[2], ARGV[i])
end
return #ARGV - 1
