-- remove.lua: removes one subscription from the record and every set.
-- Rule: docs/design.md §6 subscriptions.
--
-- remove: delete one subscription and take it out of every set it is in.
-- KEYS[1] T:subs, KEYS[2] T:ixof, KEYS[3..] the sets listed in its T:ixof entry
-- ARGV[1] id, ARGV[2] its T:ixof entry as read by the caller
-- Returns the removed subscription JSON, or nil when it is gone already
-- (or its entry changed since the caller read it: nothing removed).

local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur or cur ~= ARGV[2] then return nil end
local body = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
for i = 3, #KEYS do redis.call('SREM', KEYS[i], ARGV[1]) end
return body
