-- drain.lua: takes one recipient's held items of one reason for a digest,
-- crash-safely. The items move to a draining record first; the caller
-- enqueues the digest push (idempotent on the record's id) and then
-- deletes the record (Done). A release that finds a draining record left
-- by a crash answers it again, with its original id, before anything new.
-- Rule: docs/design.md §7 held wakes released as one digest.
--
-- KEYS[1] = <tag>:hold:q:<reason>   list of held items (JSON)
-- KEYS[2] = <tag>:hold:dr:<reason>  string: the draining record
--           {"id": "...", "items": [...]} (JSON)
-- KEYS[3] = <tag>:hold:rate         the token bucket (reason "rate" only;
--           the digest takes the token it was due at, when there is one)
-- KEYS[4] = <tag>:hold:due          hash reason → the latest due (ms) of
--           what is held (decide.lua): while it is after now, nothing is
--           taken — something was held for a later end (quiet hours made
--           longer), and that end's release takes everything
-- ARGV[1] = the id for a new draining record (the digest's slot)
-- ARGV[2] = now (ms), ARGV[3] = per (ms), ARGV[4] = burst, ARGV[5] = "1"
--           to take a token
-- ARGV[6] = the reason (the field of KEYS[4])
--
-- Returns the draining record's JSON, false when nothing is held, or
-- "later:<due ms>" when what is held is due later.

local K_HELD, K_DRAIN, K_RATE, K_DUE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local cur = redis.call('GET', K_DRAIN)
if cur then return cur end
local due = tonumber(redis.call('HGET', K_DUE, ARGV[6]) or '0')
if due > tonumber(ARGV[2]) then return 'later:' .. string.format('%d', due) end
if due > 0 then redis.call('HDEL', K_DUE, ARGV[6]) end
local items = redis.call('LRANGE', K_HELD, 0, -1)
if #items == 0 then return false end
local rec = '{"id":' .. cjson.encode(ARGV[1]) .. ',"items":[' .. table.concat(items, ',') .. ']}'
redis.call('SET', K_DRAIN, rec)
redis.call('DEL', K_HELD)
if ARGV[5] == '1' then
  local now, per, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local tok = tonumber(redis.call('HGET', K_RATE, 'tok') or burst)
  local t = tonumber(redis.call('HGET', K_RATE, 't') or now)
  if now > t then
    local add = math.floor((now - t) / per)
    tok, t = tok + add, t + add * per
  end
  if tok >= burst then tok, t = burst, now end
  if tok >= 1 then tok = tok - 1 end
  redis.call('HSET', K_RATE, 'tok', string.format('%d', tok), 't', string.format('%d', t))
  redis.call('PEXPIRE', K_RATE, per * (burst + 1))
end
return rec
