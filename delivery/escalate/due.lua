-- due.lua: lists the entries of one recipient due by a time.
-- Rule: docs/design.md §8 escalation: the due entries a check reads.
--
-- KEYS[1] = :x, KEYS[2] = :xc, KEYS[3] = :xd of the recipient
-- ARGV[1] = due bound (ms, inclusive), ARGV[2] = limit
-- Returns {ck, due, claim JSON or "", 1 if dead-lettered else 0, ...} in
-- ascending due.

local page = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for i = 1, #page, 2 do
  local ck = page[i]
  out[#out + 1] = ck
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], ck) or ''
  out[#out + 1] = redis.call('SISMEMBER', KEYS[3], ck)
end
return out
