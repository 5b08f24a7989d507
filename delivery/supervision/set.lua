-- set.lua: replaces the stored settings if nobody changed them meanwhile.
-- Rule: docs/design.md §6 workspace settings.
--
-- set settings: compare-and-set the stored settings document.
-- KEYS[1] T:settings
-- ARGV[1] the document the caller read ('' when there was none),
-- ARGV[2] the new document ('{}' deletes the key)
-- Returns 1 when written, 0 when the stored document changed meanwhile.

local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
if ARGV[2] == '{}' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
