-- consume.lua: removes dirty members whose version is still the one the
-- pass read: a subject journaled again meanwhile stays dirty.
-- Rule: docs/design.md §9 the health sweep.
--
-- KEYS[1] T:dirty; ARGV pairs of member, score read.
-- Returns how many it removed.

local n = 0
for i = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if cur and tonumber(cur) == tonumber(ARGV[i + 1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
