-- journal.lua: the journal's shared functions (docs/design.md §2 ids and
-- idempotence, §14 journal shards), included at the top of every script
-- that journals (append.lua, the PR tracker's scripts, the agent commit).
-- The script must call wg_config(ttl, maxlen, notify_prefix) with the
-- three values of Journal.AppendArgs first.
--
--   wg_append(tag, event_json, workspace, source, id)
--     → stream id of the entry (new or the one already journaled), and
--       1 when it appended, 0 when (source, id) was already there.
--
--   wg_eid(tag, source, id)
--     → the key of (source, id)'s dedup marker (keyspace.Shard.Eid).
--
--   wg_terminal(tag, ws, subject, type, time, summary, sid)
--     records the compact terminal record of a subject (docs/design.md §3
--     DeathWatch) in "<tag>:term:<ws>:<subject>", kept 30 days: callers
--     call it after appending a terminal event.
--
-- Keys it touches are all under tag, the shard's hash tag: "<tag>:journal",
-- "<tag>:eid:<sha1>" and "<tag>:term:<ws>:<subject>". Callers list
-- "<tag>:journal" in KEYS so the script is routed to its slot. It
-- publishes the tag on "<notify_prefix><ws>", once per workspace and shard.

local wg_ttl, wg_maxlen, wg_notify
local wg_published = {}
local function wg_config(ttl, maxlen, notify)
  wg_ttl = tonumber(ttl); wg_maxlen = tonumber(maxlen); wg_notify = notify
end
-- wg_eid is the marker of (source, id) in the shard of tag
-- (keyspace.Shard.Eid builds the same name).
local function wg_eid(tag, source, id)
  return tag .. ':eid:' .. redis.sha1hex(source .. '\0' .. id)
end
local function wg_append(tag, ev, ws, source, id)
  local dk = wg_eid(tag, source, id)
  local got = redis.call('GET', dk)
  if got then return got, 0 end
  local sid = redis.call('XADD', tag .. ':journal', 'MAXLEN', '~', wg_maxlen, '*', 'e', ev, 'w', ws)
  redis.call('SET', dk, sid, 'EX', wg_ttl)
  -- One message per (workspace, shard) per script call: subscribers
  -- receive it only once the script has ended, so it announces every
  -- entry this call appends there (a batch appends hundreds).
  local pk = ws .. '\0' .. tag
  if not wg_published[pk] then
    wg_published[pk] = true
    redis.call('PUBLISH', wg_notify .. ws, tag)
  end
  return sid, 1
end
-- wg_term is the terminal record of a subject (keyspace.Shard.Term).
local function wg_term(tag, ws, subject)
  return tag .. ':term:' .. ws .. ':' .. subject
end
local function wg_terminal(tag, ws, subject, typ, time, summary, sid)
  local k = wg_term(tag, ws, subject)
  redis.call('HSET', k, 'type', typ, 'time', time, 'summary', summary, 'sid', sid)
  redis.call('EXPIRE', k, 2592000)
end
