-- ack.lua: acknowledge entries of one recipient: every unacked entry with
-- seq <= through, and exactly the entries whose current seq is listed. An
-- entry that has taken a newer seq since (a fold) is not acked by its old
-- one. Acked entries are gone; the next event of their coalesce key starts
-- a fresh entry.
-- Rule: docs/design.md §7 ack.
--
-- KEYS[1..4] = :n, :e, :u, :w of the recipient
-- KEYS[5]    = :x of the recipient (an acked entry never escalates)
-- ARGV[1]    = through (0: none)
-- ARGV[2..]  = seqs
--
-- Returns the number of entries acked, or -1, having acked nothing, when
-- through or a seq is beyond the last seq assigned.

local K_LAST, K_ENTRIES, K_UNACKED, K_WAKES, K_ESC = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local last = tonumber(redis.call('GET', K_LAST) or '0')
for i = 1, #ARGV do
  if tonumber(ARGV[i]) > last then return -1 end
end

local acked = 0

-- ack drops the entry of a coalesce key from every structure.
local function ack(ck)
  redis.call('HDEL', K_ENTRIES, ck)
  redis.call('ZREM', K_WAKES, ck)
  redis.call('ZREM', K_ESC, ck)
  acked = acked + redis.call('ZREM', K_UNACKED, ck)
end

local through = tonumber(ARGV[1])
if through > 0 then
  for _, ck in ipairs(redis.call('ZRANGEBYSCORE', K_UNACKED, '-inf', int(through))) do ack(ck) end
end
for i = 2, #ARGV do
  for _, ck in ipairs(redis.call('ZRANGEBYSCORE', K_UNACKED, ARGV[i], ARGV[i])) do ack(ck) end
end
return acked
