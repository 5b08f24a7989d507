-- put.lua: sets an endpoint, keeping or replacing its secret, enables it
-- and resets its circuit breaker.
-- Rule: docs/design.md §8 push endpoints.
--
-- KEYS[1] endpoint hash, KEYS[2] breaker hash, KEYS[3] breaker window;
-- ARGV[1] url, ARGV[2] format, ARGV[3] secret to set ("" keeps the
-- endpoint's), ARGV[4] fresh secret for a new endpoint, ARGV[5] now (ms).
-- Returns {created (0|1), secret, shown (0|1)}.

local exists = redis.call('EXISTS', KEYS[1])
local secret, shown = ARGV[3], 1
if secret == '' then
  if exists == 1 then
    secret, shown = redis.call('HGET', KEYS[1], 'secret'), 0
  else
    secret = ARGV[4]
  end
end
redis.call('HSET', KEYS[1], 'url', ARGV[1], 'format', ARGV[2], 'secret', secret, 'updated_at', ARGV[5])
if exists == 0 then redis.call('HSET', KEYS[1], 'created_at', ARGV[5]) end
redis.call('HDEL', KEYS[1], 'disabled_at', 'disabled_reason')
redis.call('DEL', KEYS[2], KEYS[3])
return {1 - exists, secret, shown}
