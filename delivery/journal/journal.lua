-- journal.lua: the journal's shared functions (docs/design.md §2 ids and
-- idempotence, §14 journal shards), included at the top of every script
-- that journals (append.lua, the PR tracker's scripts, the agent commit).
-- The script must call wg_config(ttl, maxlen, notify_prefix) with the
-- three values of Journal.AppendArgs first.
--
--   wg_append(tag, event_json, workspace, source, id, fresh)
--     → stream id of the entry (new or the one already journaled), and
--       1 when it appended, 0 when (source, id) was already there.
--       fresh: the caller's own state, written in this same call with
--       the entry's stream id and kept at least as long as the marker,
--       says (source, id) was never appended: no marker is looked up
--       (docs/design.md §2); the marker is written all the same.
--
--   wg_seen(tag, source, id)
--     → the stream id (source, id) was journaled under while its marker
--       lives, else nil.
--
--   wg_entry(e)
--     → the stored form of the event table e (fields id, source, type,
--       subject, time, sessionid, priority, coalescekey, terminal,
--       summary, data as raw JSON): the compact entry of docs/design.md
--       §14 "Journal entries"; journal.decode reads it back.
--
--   wg_eid(tag, source, id)
--     → the key of (source, id)'s dedup marker as the previous version
--       wrote it (keyspace.Shard.Eid): still honoured until it expires.
--
--   wg_terminal(tag, ws, subject, type, time, summary, sid)
--     records the compact terminal record of a subject (docs/design.md §3
--     DeathWatch) in "<tag>:term:<ws>:<subject>", kept 30 days: callers
--     call it after appending a terminal event.
--
-- Dedup markers (docs/design.md §2, "The dedup window"): with h the hex
-- sha1(source NUL id), the marker of (source, id) is field h[3..22] (80
-- bits, 20 bytes: no binary conversion in Lua) of the hash
-- "<tag>:em:<start>:<h[1..2]>" (keyspace.Shard.Markers): start is the
-- period (ceil(ttl / 2) seconds, Redis's clock) the append fell in (256
-- hashes per period and shard, so none grows huge);
-- the hash expires at start + period + ttl. Its value is the stream id,
-- as the milliseconds after start when its sequence is 0, else whole.
-- A lookup reads the 3 hashes whose period may still be kept, then the
-- previous version's key "<tag>:eid:<sha1 hex>" while the shard may hold
-- such keys (wg_legacy).
--
-- Keys it touches are all under tag, the shard's hash tag: "<tag>:journal",
-- "<tag>:em:<start>:<xx>", "<tag>:eid:<sha1>" (read), "<tag>:emepoch" and
-- "<tag>:term:<ws>:<subject>". Callers list "<tag>:journal" in KEYS so the
-- script is routed to its slot. It publishes the tag on
-- "<notify_prefix><ws>", once per workspace and shard.

local wg_ttl, wg_maxlen, wg_notify, wg_period, wg_now
local wg_published = {}
local wg_expiring = {} -- marker hashes this call gave their expiry
local function wg_config(ttl, maxlen, notify)
  wg_ttl = tonumber(ttl); wg_maxlen = tonumber(maxlen); wg_notify = notify
  wg_period = math.ceil(wg_ttl / 2)
end
-- wg_eid is the previous version's marker of (source, id) in the shard of
-- tag (keyspace.Shard.Eid builds the same name).
local function wg_eid(tag, source, id)
  return tag .. ':eid:' .. redis.sha1hex(source .. '\0' .. id)
end
-- wg_markers is the hash of markers of period start, sub-bucket xx
-- (keyspace.Shard.Markers builds the same name).
local function wg_markers(tag, start, xx)
  return tag .. ':em:' .. string.format('%d', start) .. ':' .. xx
end
-- wg_key is where (source, id)'s marker goes or is looked for: its hex
-- sha1, the field (hex digits 3–22) and the sub-bucket (digits 1–2).
local function wg_key(source, id)
  local hex = redis.sha1hex(source .. '\0' .. id)
  return hex, string.sub(hex, 3, 22), string.sub(hex, 1, 2)
end
-- wg_start is the period of now on Redis's clock (read once per call).
local function wg_start()
  if not wg_now then wg_now = tonumber(redis.call('TIME')[1]) end
  return wg_now - wg_now % wg_period
end
-- wg_legacy tells whether markers of the previous version may still be
-- in tag's shard (read once per call and shard): the shard's marker
-- epoch "<tag>:emepoch" (keyspace.Shard.MarkerEpoch) is when this
-- version first appended there (Unix seconds), "0" when the shard's
-- journal was empty then (no marker of before to honour); set by the
-- first lookup. They are gone a retention after it.
local wg_legacy_of = {}
local function wg_legacy(tag)
  local l = wg_legacy_of[tag]
  if l == nil then
    local k = tag .. ':emepoch'
    local epoch = redis.call('GET', k)
    if not epoch then
      wg_start()
      epoch = '0'
      if redis.call('XLEN', tag .. ':journal') > 0 then epoch = string.format('%d', wg_now) end
      redis.call('SET', k, epoch)
    end
    epoch = tonumber(epoch) or 0
    wg_start()
    l = epoch > 0 and wg_now <= epoch + wg_ttl
    wg_legacy_of[tag] = l
  end
  return l
end
local function wg_find(tag, hex, f, xx)
  local cur = wg_start()
  for k = 0, 2 do
    local start = cur - k * wg_period
    local v = redis.call('HGET', wg_markers(tag, start, xx), f)
    if v then
      if string.find(v, '-', 1, true) then return v end
      return string.format('%d-0', start * 1000 + tonumber(v))
    end
  end
  if not wg_legacy(tag) then return nil end
  return redis.call('GET', tag .. ':eid:' .. hex) or nil
end
local function wg_seen(tag, source, id)
  return wg_find(tag, wg_key(source, id))
end
local function wg_append(tag, ev, ws, source, id, fresh)
  local hex, f, xx = wg_key(source, id)
  if not fresh then
    local got = wg_find(tag, hex, f, xx)
    if got then return got, 0 end
  end
  local sid = redis.call('XADD', tag .. ':journal', 'MAXLEN', '~', wg_maxlen, '*', 'e', ev, 'w', ws)
  local start = wg_start()
  local mk = wg_markers(tag, start, xx)
  local v = sid
  if string.sub(sid, -2) == '-0' then
    local d = tonumber(string.sub(sid, 1, -3)) - start * 1000
    if d >= 0 then v = string.format('%d', d) end
  end
  redis.call('HSET', mk, f, v)
  if not wg_expiring[mk] then
    wg_expiring[mk] = true
    redis.call('EXPIREAT', mk, start + wg_period + wg_ttl, 'NX')
  end
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
-- wg_json renders e as compact JSON in the field order of event.Event;
-- data is spliced in raw (the caller validated it), never re-encoded.
-- Without specversion, datacontenttype and workspace (the entry's "w"),
-- and without coalescekey when it is the subject; the journal's reader
-- puts them back (journal.decode).
local function wg_json(e)
  local p = {
    '"id":' .. cjson.encode(e.id),
    '"source":' .. cjson.encode(e.source),
    '"type":' .. cjson.encode(e.type),
    '"subject":' .. cjson.encode(e.subject),
    '"time":' .. cjson.encode(e.time),
  }
  local function opt(name, v)
    if v and v ~= '' then p[#p + 1] = '"' .. name .. '":' .. cjson.encode(v) end
  end
  opt('sessionid', e.sessionid)
  opt('priority', e.priority)
  if e.coalescekey ~= e.subject then opt('coalescekey', e.coalescekey) end
  if e.terminal then p[#p + 1] = '"terminal":true' end
  opt('summary', e.summary)
  if e.data and e.data ~= '' then p[#p + 1] = '"data":' .. e.data end
  return '{' .. table.concat(p, ',') .. '}'
end
-- wg_sub replaces every occurrence of needle in s by tok (plain finds;
-- an empty needle replaces nothing).
local function wg_sub(s, needle, tok)
  if needle == '' then return s end
  local i = string.find(s, needle, 1, true)
  if not i then return s end
  local n = #needle
  local j = string.find(s, needle, i + n, true)
  if not j then return string.sub(s, 1, i - 1) .. tok .. string.sub(s, i + n) end
  local out, pos = {}, 1
  while i do
    out[#out + 1] = string.sub(s, pos, i - 1)
    out[#out + 1] = tok
    pos = i + n
    i = string.find(s, needle, pos, true)
  end
  out[#out + 1] = string.sub(s, pos)
  return table.concat(out)
end
-- wg_tail is a string's JSON without its opening quote.
local function wg_tail(v) return string.sub(cjson.encode(v), 2) end
local WG_PRIORITY = { attention = '\12', info = '\14', critical = '\15' }
-- WG_DATA are the longest runs of member names and values common in a
-- GitHub event's data, each followed by its token (journal.compactTokens
-- 0x13–0x15). Only these three: every further plain find costs about a
-- microsecond of Redis per entry (docs/performance.md).
local WG_DATA = {
  '"url":"https://github.com/', '\19', '"url":"https:\\/\\/github.com\\/', '\20',
  '"draft":false,"merged":false,"labels":[', '\21',
}
-- wg_subject_repo is the repository of a subject wg_entry writes a
-- compact entry for, else nil.
local function wg_subject_repo(subject)
  return string.match(subject, '^github:([%w%._%-/]+)[#@]')
end
-- wg_entry: the compact entry of an event about a GitHub subject
-- (docs/design.md §14 "Journal entries"): "\1", the repository, "\0", the
-- title (as the summary's JSON has it, "" for none), "\0", the head sha
-- that ends the id ("" for none), "\0", then the event's JSON with its
-- envelope's member names, the repository (plain: \2; '/' escaped: \3),
-- the title (\4), the sha (\1) and WG_DATA as the one-byte tokens of
-- journal.expand. The envelope is written with its tokens in place; the
-- data is searched for each (plain finds). Any other subject: wg_json.
-- pre (optional): the caller built e.data with those tokens already in it
-- for pre.title (the title as the data's JSON has it, its header) and the
-- sha the id ends with: nothing is searched in the data, and the summary
-- has its first occurrence of pre.title and its " (<repo>)" tail
-- replaced.
local function wg_entry(e, pre)
  local subject = e.subject
  if type(subject) ~= 'string' or type(e.id) ~= 'string' or type(e.type) ~= 'string'
    or type(e.time) ~= 'string' or type(e.source) ~= 'string' then
    return wg_json(e)
  end
  local repo = wg_subject_repo(subject)
  if not repo then return wg_json(e) end
  local resc = string.gsub(repo, '/', '\\/')
  local summary, title = nil, ''
  if pre and e.summary and e.summary ~= '' then
    title = pre.title
    summary = wg_tail(e.summary)
    local tail = ' (' .. resc .. ')"'
    if string.sub(summary, -#tail) == tail then summary = string.sub(summary, 1, -#tail - 1) .. ' (\3)"' end
    local i = title ~= '' and string.find(summary, title, 1, true)
    if i then summary = string.sub(summary, 1, i - 1) .. '\4' .. string.sub(summary, i + #title) end
  elseif pre then
    title = pre.title
  elseif e.summary and e.summary ~= '' then
    summary = wg_tail(e.summary)
    local a = string.find(summary, ': ', 1, true)
    if a then
      local b, k = nil, a
      while true do
        k = string.find(summary, ' (', k + 1, true)
        if not k then break end
        b = k
      end
      if b and b - a > 6 then
        title = string.sub(summary, a + 2, b - 1)
        local tail = string.sub(summary, b)
        if tail == ' (' .. resc .. ')"' then tail = ' (\3)"' end
        summary = string.sub(summary, 1, a + 1) .. '\4' .. tail
      end
    end
  end
  local id, sha = e.id, string.sub(e.id, -40)
  if #sha == 40 and string.find(sha, '^%x+$') then
    id = string.sub(cjson.encode(string.sub(id, 1, -41)), 1, -2) .. '\1"'
  else
    sha, id = '', cjson.encode(id)
  end
  local p = { '\1', repo, '\0', title, '\0', sha, '\0', '\5', id }
  if e.source == '//github.com/' .. repo then
    p[#p + 1] = '\6'
  else
    p[#p + 1] = ',"source":' .. cjson.encode(e.source)
  end
  if string.sub(e.type, 1, 20) == 'github.pull_request.' then
    p[#p + 1] = '\7' .. wg_tail(string.sub(e.type, 21))
  elseif string.sub(e.type, 1, 7) == 'github.' then
    p[#p + 1] = '\18' .. wg_tail(string.sub(e.type, 8))
  else
    p[#p + 1] = ',"type":' .. cjson.encode(e.type)
  end
  p[#p + 1] = '\8\2' .. wg_tail(string.sub(subject, 8 + #repo))
  p[#p + 1] = '\11' .. wg_tail(e.time)
  if e.sessionid and e.sessionid ~= '' then p[#p + 1] = ',"sessionid":' .. cjson.encode(e.sessionid) end
  if e.priority and e.priority ~= '' then
    p[#p + 1] = WG_PRIORITY[e.priority] or (',"priority":' .. cjson.encode(e.priority))
  end
  if e.coalescekey and e.coalescekey ~= '' and e.coalescekey ~= subject then
    p[#p + 1] = ',"coalescekey":' .. cjson.encode(e.coalescekey)
  end
  if e.terminal then p[#p + 1] = ',"terminal":true' end
  if summary then p[#p + 1] = '\16' .. summary end
  local d = e.data
  if pre then
    p[#p + 1] = '\17' .. d
  elseif d and d ~= '' then
    d = wg_sub(d, title, '\4')
    d = wg_sub(d, sha, '\1')
    d = wg_sub(d, resc, '\3')
    d = wg_sub(d, repo, '\2')
    for i = 1, #WG_DATA, 2 do d = wg_sub(d, WG_DATA[i], WG_DATA[i + 1]) end
    p[#p + 1] = '\17' .. d
  end
  p[#p + 1] = '}'
  return table.concat(p)
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
