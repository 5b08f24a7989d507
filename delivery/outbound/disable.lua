-- disable.lua: disables an endpoint that still has the URL a push was
-- refused by: a PUT with a new URL in between wins.
-- Rule: docs/design.md §8 push endpoints refused by the receiver.
--
-- KEYS[1] endpoint hash; ARGV[1] url, ARGV[2] now (ms), ARGV[3] reason.
-- Returns 1 when it disabled it.

if redis.call('HGET', KEYS[1], 'url') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'disabled_at', ARGV[2], 'disabled_reason', ARGV[3])
return 1
