-- pause.lua: the marker of a session paused until a time
-- (docs/design.md §7 "Paused sessions"), read and written by the router as it
-- routes the session's events in journal order. An idle or stale alarm
-- about a paused session surfaces at first sight, then at most once per
-- resurface interval; the others are suppressed.
--
-- KEYS[1] = <shard tag>:pause:<ws>:<party>  hash  until (ms: the pause's
--           end), last (ms: journal time of the last alarm that surfaced),
--           id (that alarm's event key). Expires ARGV[6] after until
--           (counted from the event's time).
-- ARGV[1] = "pause" | "end" | "alarm"
-- ARGV[2] = the event's journal time (ms)
-- ARGV[3] = pause: until (ms)
-- ARGV[4] = alarm: the event's key (source and id)
-- ARGV[5] = alarm: the resurface interval (ms)
-- ARGV[6] = pause: how long the marker outlives until (ms), for re-runs
--
-- Returns, for "alarm": 1 when the alarm surfaces (not paused at its
-- time, the first alarm since the pause, the first past the interval, or
-- a re-run of the one that surfaced last), 0 when it is suppressed. For
-- "pause" and "end": 1.
--
-- A re-run of the routing re-applies the same events in the same order,
-- so the marker answers the same, and the alarm that surfaced stays
-- surfaced (its key is kept).

local K = KEYS[1]
local op, at = ARGV[1], tonumber(ARGV[2])

if op == 'end' then
  redis.call('DEL', K)
  return 1
end

local untilMs = tonumber(redis.call('HGET', K, 'until') or '0')

if op == 'pause' then
  -- A new pause after the last one ended starts afresh (first sight
  -- again); one that renews a pause still running keeps its resurface
  -- clock, so renewing is no way to be heard more often.
  if untilMs <= at then redis.call('DEL', K) end
  local u = tonumber(ARGV[3])
  redis.call('HSET', K, 'until', string.format('%d', u))
  -- Relative to the event's time, not the server's clock: the marker
  -- lives as long as the pause it records, plus the margin.
  redis.call('PEXPIRE', K, u - at + tonumber(ARGV[6]))
  return 1
end

-- alarm
if untilMs <= at then return 1 end
local id = redis.call('HGET', K, 'id')
if id == ARGV[4] then return 1 end
local last = redis.call('HGET', K, 'last')
if not last or at - tonumber(last) >= tonumber(ARGV[5]) then
  redis.call('HSET', K, 'last', string.format('%d', at), 'id', ARGV[4])
  return 1
end
return 0
