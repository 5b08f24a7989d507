-- pos.lua: moves stream positions forward only.
-- Rule: docs/design.md §9 the health sweep.
--
-- KEYS[1] <prefix>:health:pos; ARGV pairs of field, stream id.
-- Returns 1.

local function parse(id)
  local a, b = string.match(id or '', '^(%d+)-(%d+)$')
  if not a then return nil end
  return tonumber(a), tonumber(b)
end
for i = 1, #ARGV, 2 do
  local cm, cn = parse(redis.call('HGET', KEYS[1], ARGV[i]))
  local nm, nn = parse(ARGV[i + 1])
  if nm and (not cm or nm > cm or (nm == cm and nn > cn)) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
