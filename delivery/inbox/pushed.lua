-- pushed.lua: a wake's push got its 2xx from a party that acks by its
-- endpoint (a human: party, docs/design.md §7): the party is caught up with what
-- the push carried. When the entry is still at the pushed seq it is acked.
-- When it has folded since (the push was decided at seq, later events took
-- newer seqs), those later events were never sent: measured against what
-- the party has seen they are a fresh entry, which wakes by the rules of a
-- new entry — so an attention+ fold that the wake-again rule had kept a
-- notice decides a wake now, at a new seq, and its push is the caller's to
-- enqueue. A fold that already decided a wake of its own has its push on
-- the way, and an info fold wakes nobody: both are left as they are.
--
-- KEYS[1..5] = :n, :e, :u, :w, :x of the recipient
-- ARGV[1]    = the coalesce key the push was for
-- ARGV[2]    = the seq the push carried
-- ARGV[3]    = now (ms since the epoch)
-- ARGV[4]    = the recipient's notify channel (Pub/Sub)
--
-- Returns {acked, seq}: acked 1 when the entry was acked; seq > 0 when a
-- wake was decided at that new seq (then acked is 0); {0, 0} when there
-- was nothing to do (acked already, or its newer update wakes by itself).

local K_LAST, K_ENTRIES, K_UNACKED, K_WAKES, K_ESC = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ck, pushed = ARGV[1], tonumber(ARGV[2])

local score = redis.call('ZSCORE', K_UNACKED, ck)
local cur = redis.call('HGET', K_ENTRIES, ck)
if not score or not cur then return { 0, 0 } end
if tonumber(score) <= pushed then
  redis.call('HDEL', K_ENTRIES, ck)
  redis.call('ZREM', K_WAKES, ck)
  redis.call('ZREM', K_ESC, ck)
  redis.call('ZREM', K_UNACKED, ck)
  return { 1, 0 }
end

local m, h, l, s = split_entry(cur)
local meta = cjson.decode(m)
if meta.w or meta.k ~= 'notice' then return { 0, 0 } end

local seq = redis.call('INCR', K_LAST)
local latest = h
if l ~= '' then latest = l end
local ty = cjson.decode(latest).type
meta.k, meta.w, meta.ws, meta.wy = 'wake', true, int(seq), ty
redis.call('HSET', K_ENTRIES, ck, join_entry(meta, h, l, s))
redis.call('ZADD', K_UNACKED, seq, ck)
redis.call('ZADD', K_WAKES, seq, ck)
redis.call('PUBLISH', ARGV[4], 'wake')
return { 0, seq }
