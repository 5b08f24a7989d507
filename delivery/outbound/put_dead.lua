-- put_dead.lua: stores a dead letter and drops the oldest past the cap.
-- Rule: docs/design.md §8 dead letters of pushes, capped.
--
-- KEYS[1] hash, KEYS[2] index; ARGV[1] id, ARGV[2] JSON, ARGV[3] dead_at
-- (ms), ARGV[4] cap. Returns 1.

redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
end
return 1
