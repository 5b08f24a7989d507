-- list.lua: a page of one recipient's unacked entries in ascending seq,
-- read in one step so each entry comes with the seq it has now; for a
-- long-poll, only once an entry after the cursor decided a wake.
-- Rule: docs/design.md §7 reading an inbox; §4 long-poll.
--
-- KEYS[1..4] = :n, :e, :u, :w of the recipient
-- ARGV[1]    = after: entries with seq > after (0 = every unacked entry)
-- ARGV[2]    = limit
-- ARGV[3]    = "1": return the page only when an unacked entry with
--              seq > after decided a wake (else no entries); "0": always
--
-- Returns {last seq assigned, woke (1 when an entry with seq > after
-- decided a wake, else 0), seq, coalesce key, entry, seq, ...}.

local K_LAST, K_ENTRIES, K_UNACKED, K_WAKES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local after = after_bound(tonumber(ARGV[1]))
local woke = #redis.call('ZRANGEBYSCORE', K_WAKES, after, '+inf', 'LIMIT', 0, 1)
local out = { tonumber(redis.call('GET', K_LAST) or '0'), woke }
if woke == 0 and ARGV[3] == '1' then return out end
local page = redis.call('ZRANGEBYSCORE', K_UNACKED, after, '+inf',
  'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #page, 2 do
  out[#out + 1] = tonumber(page[i + 1])
  out[#out + 1] = page[i]
  out[#out + 1] = redis.call('HGET', K_ENTRIES, page[i])
end
return out
