-- allow.lua: decides whether an attempt may go out now.
-- Rule: docs/design.md §8 outbound pushes: the circuit breaker.
--
-- KEYS[1] breaker hash; ARGV[1] now (ms), ARGV[2] probe bound (ms).
-- Returns 0 when the attempt may go (closed, or it is the half-open probe),
-- else the time (ms) until which it must wait.

local open = tonumber(redis.call('HGET', KEYS[1], 'open_until') or '0')
if open == 0 then return 0 end
local now = tonumber(ARGV[1])
if now < open then return open end
local probe = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
if now < probe then return probe end
redis.call('HSET', KEYS[1], 'probe_until', now + tonumber(ARGV[2]))
return 0
