-- list.lua: a page of one recipient's unacked entries in ascending seq,
-- read in one step so each entry comes with the seq it has now.
--
-- KEYS[1..3] = :n, :e, :u of the recipient
-- ARGV[1]    = after: entries with seq > after (0 = every unacked entry)
-- ARGV[2]    = limit
--
-- Returns {last seq assigned, seq, coalesce key, entry, seq, ...}.

local K_LAST, K_ENTRIES, K_UNACKED = KEYS[1], KEYS[2], KEYS[3]
local out = { tonumber(redis.call('GET', K_LAST) or '0') }
local page = redis.call('ZRANGEBYSCORE', K_UNACKED, after_bound(tonumber(ARGV[1])), '+inf',
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #page, 2 do
  out[#out + 1] = tonumber(page[i + 1])
  out[#out + 1] = page[i]
  out[#out + 1] = redis.call('HGET', K_ENTRIES, page[i])
end
return out
